//! The sweep's own formats, like common's (common/tests/formats_documented.rs):
//! README's "File formats" section names each schema and every field of its
//! example (a resolved config's keys: its "Config" section).

use common::wire::Versioned;
use std::collections::BTreeSet;

fn section(readme: &str, title: &str) -> String {
    let start = readme
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("README has a \"{title}\" section"));
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

fn names_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !part(text[..i].chars().next_back()) && !part(text[i + word.len()..].chars().next())
    })
}

fn check<T: Versioned>(text: &str, missing: &mut Vec<String>) {
    if !text.contains(T::SCHEMA) {
        missing.push(format!("schema {}", T::SCHEMA));
    }
    let mut fields = BTreeSet::new();
    common::wire::field_names(&serde_json::to_value(T::example()).unwrap(), &mut fields);
    for f in fields {
        if !names_word(text, &f) {
            missing.push(format!("{}: field `{f}`", T::SCHEMA));
        }
    }
}

#[test]
fn readme_names_every_sweep_schema_and_field() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md at the workspace root");
    let text = section(&readme, "File formats") + &section(&readme, "Config");
    let mut missing = Vec::new();
    check::<sweep::driver::Settings>(&text, &mut missing);
    check::<sweep::report::SweepReport>(&text, &mut missing);
    assert!(missing.is_empty(), "README lacks:\n{}", missing.join("\n"));
}
