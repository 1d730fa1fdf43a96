//! docs/FORMATS.md, "File formats" is the user's reference for every format
//! a tool writes: it must name each schema of `common::wire::all()` and each
//! field of its example (a resolved config's keys may be named in
//! docs/guide/config.md, "Config" instead), so a field added to a struct without a
//! word in the docs fails here.

#[test]
fn formats_doc_names_every_schema_and_every_field() {
    let docs = common_docs();
    let missing: Vec<String> = common::wire::all()
        .iter()
        .flat_map(|(schema, example)| common::wire::undocumented_in(&docs, schema, example))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/FORMATS.md, \"File formats\" lacks:\n{}",
        missing.join("\n")
    );
}

/// Each failure class has its row in docs/FORMATS.md, "Failure classes",
/// in `Class::ALL`'s order.
#[test]
fn formats_doc_lists_every_failure_class() {
    let formats =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FORMATS.md"))
            .expect("docs/FORMATS.md at the workspace root");
    let section = formats
        .split("### Failure classes")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/FORMATS.md has a \"Failure classes\" section");
    let rows: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let classes: Vec<&str> = common::wire::failure::Class::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(rows, classes);
}

/// docs/FORMATS.md, then the guide's chapters (docs/guide/*.md, whose
/// "Config" the check also reads).
fn common_docs() -> String {
    let formats =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FORMATS.md"))
            .expect("docs/FORMATS.md at the workspace root");
    format!("{formats}\n{}", testkit::guide_chapters())
}

/// Each code of `train run --exit-codes classes` has its row in
/// docs/FORMATS.md, "Exit codes", as the source says it.
#[test]
fn formats_doc_lists_every_exit_code_class() {
    let formats =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FORMATS.md"))
            .expect("docs/FORMATS.md at the workspace root");
    for c in common::exit::classes::ALL {
        let row = format!(
            "| {} | `{}` | {} | {} |",
            c.code,
            c.name,
            if c.retriable { "yes" } else { "no" },
            c.means
        );
        assert!(
            formats.contains(&row),
            "docs/FORMATS.md lacks the row\n{row}"
        );
    }
}
