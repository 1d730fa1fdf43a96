//! Helpers shared by the cross-tool tests.

use std::path::PathBuf;

/// target/<profile>/<name>, next to the test's own executable in deps/.
pub fn bin(name: &str) -> PathBuf {
    let mut dir = std::env::current_exe().unwrap();
    dir.pop();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built: run `cargo test --workspace`",
        path.display()
    );
    path
}
