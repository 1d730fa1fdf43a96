//! The sweep's own formats (common::wire::sweep), like common's
//! (common/tests/formats_documented.rs): docs/FORMATS.md, "File formats"
//! names each schema and every field.

#[test]
fn formats_doc_names_every_sweep_schema_and_field() {
    let formats =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FORMATS.md"))
            .expect("docs/FORMATS.md at the workspace root");
    let docs = format!("{formats}\n{}", testkit::guide_chapters());
    let mut missing = common::wire::undocumented::<common::wire::sweep::Settings>(&docs);
    missing.extend(common::wire::undocumented::<common::wire::sweep::SweepReport>(&docs));
    missing.extend(common::wire::undocumented::<common::wire::sweep::SlurmJobs>(&docs));
    assert!(
        missing.is_empty(),
        "docs/FORMATS.md lacks:\n{}",
        missing.join("\n")
    );
}
