//! Rebuilds when a migration is added (sqlx embeds them at compile time), names the git commit
//! the build comes from (`askgate --version`, `askgate_build_info`), and marks the build when
//! a test that needs a tool this machine lacks (a browser, a client generator, the Python MCP
//! SDK) cannot run here, so that it reports itself as
//! ignored rather than passed. In CI (`CI` set) they always run: a missing tool fails them.

use std::path::Path;

const BROWSER: [&str; 2] = ["/usr/bin/chromium", "/usr/bin/chromedriver"];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(no_browser)");
    println!("cargo::rustc-check-cfg=cfg(no_python_mcp)");
    println!("cargo::rerun-if-changed=migrations");
    println!("cargo::rerun-if-env-changed=CI");
    // Installing or removing a package changes the directory.
    println!("cargo::rerun-if-changed=/usr/bin");
    println!("cargo::rustc-env=ASKGATE_COMMIT={}", commit());
    let missing = BROWSER.iter().any(|path| !Path::new(path).exists());
    if missing && std::env::var_os("CI").is_none() {
        println!("cargo::rustc-cfg=no_browser");
    }
    // The client generators' tests, likewise: each tool is looked for on the PATH.
    println!("cargo::rustc-check-cfg=cfg(no_openapi_python_client, no_openapi_typescript)");
    println!("cargo::rerun-if-env-changed=PATH");
    for (tool, cfg) in
        [("openapi-python-client", "no_openapi_python_client"), ("openapi-typescript", "no_openapi_typescript")]
    {
        let found = std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()));
        if !found && std::env::var_os("CI").is_none() {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
    // The official Python MCP SDK, which the MCP results' test drives.
    let sdk = std::process::Command::new("python3").args(["-c", "import mcp"]).output();
    if !sdk.is_ok_and(|out| out.status.success()) && std::env::var_os("CI").is_none() {
        println!("cargo::rustc-cfg=no_python_mcp");
    }
}

/// The short commit of the checkout (or `ASKGATE_COMMIT`, for builds without `.git` such as
/// the container's), or `unknown` outside a git checkout (a crate tarball).
fn commit() -> String {
    println!("cargo::rerun-if-env-changed=ASKGATE_COMMIT");
    if let Ok(given) = std::env::var("ASKGATE_COMMIT")
        && !given.trim().is_empty()
    {
        return given.trim().to_owned();
    }
    for path in [".git/HEAD", ".git/refs/heads"] {
        if Path::new(path).exists() {
            println!("cargo::rerun-if-changed={path}");
        }
    }
    let output = std::process::Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output();
    match output {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => "unknown".to_owned(),
    }
}
