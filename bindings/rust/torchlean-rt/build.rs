//! rpath for this crate's own tests and examples (link-arg lines of a dependency's build script
//! do not reach the binaries of its dependents).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TORCHLEAN_RT_LIB_DIR");
    if let Ok(d) = std::env::var("DEP_TORCHLEAN_RT_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{d}");
    }
}
