//! The sweep's own formats, like common's (common/tests/formats_documented.rs):
//! README's "File formats" section names each schema and every field.

#[test]
fn readme_names_every_sweep_schema_and_field() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md at the workspace root");
    let mut missing = common::wire::undocumented::<sweep::driver::Settings>(&readme);
    missing.extend(common::wire::undocumented::<sweep::report::SweepReport>(
        &readme,
    ));
    missing.extend(common::wire::undocumented::<sweep::slurm::SlurmJobs>(
        &readme,
    ));
    assert!(missing.is_empty(), "README lacks:\n{}", missing.join("\n"));
}
