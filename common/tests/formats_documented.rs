//! README's "File formats" section is the user's reference for every format
//! a tool writes: it must name each schema of `common::wire::all()` and each
//! field of its example (a resolved config's keys may be named in its
//! "Config" section instead), so a field added to a struct without a word
//! in README fails here.

#[test]
fn readme_names_every_schema_and_every_field() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md at the workspace root");
    let missing: Vec<String> = common::wire::all()
        .iter()
        .flat_map(|(schema, example)| common::wire::undocumented_in(&readme, schema, example))
        .collect();
    assert!(
        missing.is_empty(),
        "README \"File formats\" lacks:\n{}",
        missing.join("\n")
    );
}
