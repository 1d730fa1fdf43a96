//! The sweep's own formats (common::wire::sweep), like common's
//! (common/tests/formats_documented.rs):
//! README's "File formats" section names each schema and every field.

#[test]
fn readme_names_every_sweep_schema_and_field() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md at the workspace root");
    let mut missing = common::wire::undocumented::<common::wire::sweep::Settings>(&readme);
    missing.extend(common::wire::undocumented::<common::wire::sweep::SweepReport>(&readme));
    missing.extend(common::wire::undocumented::<common::wire::sweep::SlurmJobs>(&readme));
    assert!(missing.is_empty(), "README lacks:\n{}", missing.join("\n"));
}
