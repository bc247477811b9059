//! Finds (or, with the `build-from-source` feature, builds) libtorchlean_rt and links it.
//!
//! Discovery, first match wins:
//! 1. `TLRT_LIB_DIR`: a directory holding `libtorchlean_rt.so` (a meson build directory or an
//!    installed libdir). Explicit: if it is set but wrong, the build fails (no fallback).
//! 2. The `pkg-config` program (`$PKG_CONFIG`, default `pkg-config`; it honours
//!    `PKG_CONFIG_PATH`): `--libs-only-L torchlean_rt`, else `--variable=libdir torchlean_rt`.
//! 3. The usual system directories: /usr/local/lib/<multiarch>, /usr/local/lib, /usr/local/lib64,
//!    /usr/lib/<multiarch>, /usr/lib, /usr/lib64.
//!
//! With the `build-from-source` feature (and no `TLRT_LIB_DIR`) the library is built with meson
//! from `TLRT_SOURCE_DIR` (default: the repository holding this crate) into `$OUT_DIR/meson-build`.
//!
//! An rpath to the directory is added (except for the dynamic linker's default directories) so
//! that this package's tests run without LD_LIBRARY_PATH; the directory is passed on to the
//! dependents' build scripts as `DEP_TORCHLEAN_RT_LIB_DIR`.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

const LIB: &str = "torchlean_rt";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for v in ["TLRT_LIB_DIR", "TLRT_SOURCE_DIR", "PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR",
              "PKG_CONFIG_SYSROOT_DIR", "MESON"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    let file = lib_file_name();
    let multiarch = multiarch();

    let dir = if let Some(d) = env::var_os("TLRT_LIB_DIR") {
        if from_source() {
            println!("cargo:warning=torchlean-rt-sys: TLRT_LIB_DIR is set, so the `build-from-source` \
                      feature is ignored and {} is linked", Path::new(&d).join(&file).display());
        }
        explicit_dir(&d, &file)
    } else if from_source() {
        build_from_source(&file)
    } else {
        let mut tried = Vec::new();
        match pkg_config_dir(&file, &mut tried).or_else(|| system_dir(&file, &multiarch, &mut tried)) {
            Some(d) => d,
            None => not_found(&file, &multiarch, &tried),
        }
    };

    println!("cargo:rustc-link-search=native={}", dir.display());
    if !is_default_linker_dir(&dir, &multiarch) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    // Dependents' build scripts (torchlean-rt's) see this as DEP_TORCHLEAN_RT_LIB_DIR.
    println!("cargo:lib_dir={}", dir.display());
    println!("cargo:rustc-link-lib=dylib={LIB}");
}

fn from_source() -> bool {
    env::var_os("CARGO_FEATURE_BUILD_FROM_SOURCE").is_some()
}

fn lib_file_name() -> String {
    match env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("macos") | Ok("ios") => format!("lib{LIB}.dylib"),
        _ => format!("lib{LIB}.so"),
    }
}

/// The Debian multiarch directory name of the target (x86_64-linux-gnu, aarch64-linux-gnu, ...).
fn multiarch() -> String {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_else(|_| "linux".into());
    let abi = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_else(|_| "gnu".into());
    let arch = match arch.as_str() {
        "x86" => "i386".to_string(),
        "powerpc64" if env::var("CARGO_CFG_TARGET_ENDIAN").as_deref() == Ok("little") => "powerpc64le".into(),
        _ => arch,
    };
    let abi = if arch == "arm" { "gnueabihf".to_string() } else { abi };
    format!("{arch}-{os}-{abi}")
}

fn is_default_linker_dir(dir: &Path, multiarch: &str) -> bool {
    ["/lib", "/usr/lib", "/lib64", "/usr/lib64"].iter().any(|base| {
        dir == Path::new(base) || dir == Path::new(base).join(multiarch)
    })
}

/// `TLRT_LIB_DIR`: must name a directory holding the library; anything else stops the build.
fn explicit_dir(d: &std::ffi::OsStr, file: &str) -> PathBuf {
    let shown = Path::new(d).display().to_string();
    let dir = match PathBuf::from(d).canonicalize() {
        Ok(p) => p,
        Err(e) => fail(&[format!("TLRT_LIB_DIR={shown}: {e}."), hint(file)]),
    };
    if !dir.join(file).is_file() {
        fail(&[format!("TLRT_LIB_DIR={shown} has no {file}."), hint(file)]);
    }
    dir
}

fn hint(file: &str) -> String {
    format!("Set TLRT_LIB_DIR to the directory holding {file} (a meson build directory, or\n    \
             <prefix>/lib/{} of an installed library), or unset it to search pkg-config and the\n    \
             system directories.", multiarch())
}

/// The directories pkg-config reports for torchlean_rt that hold the library.
fn pkg_config_dir(file: &str, tried: &mut Vec<String>) -> Option<PathBuf> {
    let prog = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let run = |args: &[&str]| -> Result<String, String> {
        match Command::new(&prog).args(args).output() {
            Err(e) => Err(format!("{prog} could not be run: {e}")),
            Ok(o) if !o.status.success() => {
                let msg = String::from_utf8_lossy(&o.stderr);
                let msg = msg.lines().next().unwrap_or("").trim();
                Err(format!("{prog} {}: {}", args.join(" "),
                            if msg.is_empty() { format!("exit status {}", o.status) } else { msg.to_string() }))
            }
            Ok(o) => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        }
    };
    let mut dirs: Vec<PathBuf> = match run(&["--libs-only-L", LIB]) {
        Err(e) => {
            tried.push(e);
            return None;
        }
        Ok(out) => out.split_whitespace().filter_map(|t| t.strip_prefix("-L")).map(PathBuf::from).collect(),
    };
    // pkg-config leaves out -L for the system directories: ask for libdir then.
    if let Ok(libdir) = run(&["--variable=libdir", LIB]) {
        if !libdir.is_empty() {
            dirs.push(PathBuf::from(libdir));
        }
    }
    let found = dirs.iter().find(|d| d.join(file).is_file()).cloned();
    if found.is_none() {
        let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        tried.push(format!("{prog} found {LIB}, but none of its directories [{}] holds {file}",
                           shown.join(", ")));
    }
    found
}

fn system_dir(file: &str, multiarch: &str, tried: &mut Vec<String>) -> Option<PathBuf> {
    let dirs = [format!("/usr/local/lib/{multiarch}"), "/usr/local/lib".into(), "/usr/local/lib64".into(),
                format!("/usr/lib/{multiarch}"), "/usr/lib".into(), "/usr/lib64".into()];
    let found = dirs.iter().map(PathBuf::from).find(|d| d.join(file).is_file());
    if found.is_none() {
        tried.push(format!("no {file} in {}", dirs.join(", ")));
    }
    found
}

fn not_found(file: &str, multiarch: &str, tried: &[String]) -> ! {
    let mut lines = vec![format!("{file} was not found."), "Searched:".to_string(),
                         "  - TLRT_LIB_DIR: not set".to_string()];
    lines.extend(tried.iter().map(|t| format!("  - {t}")));
    lines.extend([
        String::new(),
        "Tell the build where the library is, with one of:".to_string(),
        format!("  TLRT_LIB_DIR=<the directory holding {file}>    (a meson build directory, or an installed libdir)"),
        format!("  PKG_CONFIG_PATH=<prefix>/lib/{multiarch}/pkgconfig    (an installed library; meson's libdir on Debian/Ubuntu)"),
        String::new(),
        "To build and install the library, in a torchlean_rt source checkout:".to_string(),
        "  meson setup build -Dtests=false --buildtype=release && meson install -C build".to_string(),
        "  (prefix /usr/local: found without settings; for another --prefix set PKG_CONFIG_PATH as above)".to_string(),
        String::new(),
        "Or let cargo build it with meson (needs meson, ninja, a C++ compiler and the source tree):".to_string(),
        "  enable the `build-from-source` feature of torchlean-rt (or torchlean-rt-sys), with".to_string(),
        "  TLRT_SOURCE_DIR=<torchlean_rt source checkout> unless the crate sits in that checkout.".to_string(),
    ]);
    fail(&lines)
}

/// Prints the lines to stderr (cargo shows them under "--- stderr") and stops the build.
fn fail(lines: &[String]) -> ! {
    eprintln!();
    eprintln!("error: torchlean-rt-sys: cannot link libtorchlean_rt");
    for l in lines {
        eprintln!("  {l}");
    }
    eprintln!();
    exit(1)
}

// ---- the `build-from-source` feature -----------------------------------------------------------

fn build_from_source(file: &str) -> PathBuf {
    let src = source_dir();
    // Rebuild when the library's sources change (not the whole checkout: the cargo target
    // directory may live inside it).
    for p in ["meson.build", "meson_options.txt", "abi", "core", "stub", "cuda", "cmake"] {
        if src.join(p).exists() {
            println!("cargo:rerun-if-changed={}", src.join(p).display());
        }
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let build = out.join("meson-build");
    let stamp = out.join("meson-source-dir");
    let meson = env::var("MESON").unwrap_or_else(|_| "meson".into());

    // A build directory configured for another source tree is wiped; one for this tree is only
    // recompiled (ninja reruns meson itself when a meson.build changed).
    let configured = build.join("meson-private").join("coredata.dat").is_file()
        && fs::read_to_string(&stamp).ok().as_deref() == Some(&*src.to_string_lossy());
    if !configured {
        if build.exists() {
            if let Err(e) = fs::remove_dir_all(&build) {
                fail(&[format!("cannot remove the stale meson build directory {}: {e}", build.display())]);
            }
        }
        run_meson(&meson, &[
            "setup".as_ref(), build.as_os_str(), src.as_os_str(), "-Dtests=false".as_ref(),
            "-Dcuda=disabled".as_ref(), "--buildtype=release".as_ref(), "-Ddefault_library=shared".as_ref(),
        ]);
        if let Err(e) = fs::write(&stamp, src.to_string_lossy().as_bytes()) {
            fail(&[format!("cannot write {}: {e}", stamp.display())]);
        }
    }
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "1".into());
    run_meson(&meson, &["compile".as_ref(), "-C".as_ref(), build.as_os_str(), "-j".as_ref(), jobs.as_ref()]);
    if !build.join(file).is_file() {
        fail(&[format!("meson compile succeeded but {} is missing.", build.join(file).display())]);
    }
    build
}

/// TLRT_SOURCE_DIR, else the repository three levels above this crate (bindings/rust/<crate>).
fn source_dir() -> PathBuf {
    let is_source = |p: &Path| p.join("meson.build").is_file() && p.join("abi").join("torchlean_rt.h").is_file();
    if let Some(d) = env::var_os("TLRT_SOURCE_DIR") {
        let p = PathBuf::from(&d);
        match p.canonicalize() {
            Ok(c) if is_source(&c) => return c,
            _ => fail(&[format!("TLRT_SOURCE_DIR={} is not a torchlean_rt source tree \
                                 (no meson.build and abi/torchlean_rt.h there).", p.display()),
                        "Set it to the root of a torchlean_rt checkout.".to_string()]),
        }
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    match manifest.join("../../..").canonicalize() {
        Ok(c) if is_source(&c) => c,
        _ => fail(&[
            "the `build-from-source` feature needs the torchlean_rt sources, and this crate does not".to_string(),
            format!("sit in a checkout of them ({} is not one).", manifest.join("../../..").display()),
            "Set TLRT_SOURCE_DIR=<root of a torchlean_rt checkout> (the directory with meson.build),".to_string(),
            "or drop the feature and point TLRT_LIB_DIR / PKG_CONFIG_PATH at a built library.".to_string(),
        ]),
    }
}

fn run_meson(meson: &str, args: &[&std::ffi::OsStr]) {
    let shown = format!("{meson} {}", args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "));
    match Command::new(meson).args(args).output() {
        Err(e) => fail(&[format!("`{shown}` could not be run: {e}."),
                         "The `build-from-source` feature needs meson (>= the version meson.build asks for), \
                          ninja and a C/C++ compiler on PATH (MESON names another meson program)."
                             .to_string()]),
        Ok(o) => {
            // Meson's own output goes to the build script's stderr: cargo shows it on failure
            // (and keeps it in target/*/build/torchlean-rt-sys-*/stderr).
            eprint!("{}", String::from_utf8_lossy(&o.stdout));
            eprint!("{}", String::from_utf8_lossy(&o.stderr));
            if !o.status.success() {
                fail(&[format!("`{shown}` failed ({}); its output is above.", o.status)]);
            }
        }
    }
}
