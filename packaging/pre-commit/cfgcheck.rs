//! cfgcheck under the name pre-commit installs it as (`trainguard-cfgcheck`,
//! .pre-commit-hooks.yaml): pre-commit's Rust hooks run `cargo install
//! --path .` at the repository's root, whose package is this one; the name
//! differs from tools/cfgcheck's binary so the two never share a file in
//! target/. Everything is in cfgcheck's library.

fn main() -> std::process::ExitCode {
    cfgcheck::main()
}
