//! Finds libtorchlean_rt: the directory in TLRT_LIB_DIR (a build directory or <prefix>/lib), else
//! `pkg-config --libs-only-L torchlean_rt` through the pkg-config program (no crates), else the
//! linker's default search path. An rpath to the directory is added so that tests and examples
//! run without LD_LIBRARY_PATH.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TLRT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(d) = env::var("TLRT_LIB_DIR") {
        match PathBuf::from(&d).canonicalize() {
            Ok(p) => dirs.push(p),
            Err(e) => panic!("TLRT_LIB_DIR={d}: {e}"),
        }
    } else if let Ok(out) = Command::new("pkg-config").args(["--libs-only-L", "torchlean_rt"]).output() {
        if out.status.success() {
            for tok in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Some(d) = tok.strip_prefix("-L") {
                    dirs.push(PathBuf::from(d));
                }
            }
        }
    }
    for d in &dirs {
        println!("cargo:rustc-link-search=native={}", d.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", d.display());
    }
    // Consumers (torchlean-rt's build script) see this as DEP_TORCHLEAN_RT_LIB_DIR.
    if let Some(d) = dirs.first() {
        println!("cargo:lib_dir={}", d.display());
    }
    println!("cargo:rustc-link-lib=dylib=torchlean_rt");
}
