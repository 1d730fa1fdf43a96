//! README's "File formats" section is the user's reference for every format
//! a tool writes: it must name each schema of `common::wire::all()` and each
//! field of its example (a resolved config's keys may be named in its
//! "Config" section instead), so a field added to a struct without a word
//! in README fails here.

use std::collections::BTreeSet;

fn section(title: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md at the workspace root");
    let start = readme
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("README has a \"{title}\" section"));
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

fn names_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !part(before) && !part(after)
    })
}

#[test]
fn readme_names_every_schema_and_every_field() {
    // Formats that embed a resolved config (chain.yaml, train bench) name
    // its keys, which README's "Config" section documents.
    let section = section("File formats") + &section("Config");
    let mut missing = Vec::new();
    for (schema, example) in common::wire::all() {
        if !section.contains(schema) {
            missing.push(format!("schema {schema}"));
        }
        let mut fields = BTreeSet::new();
        common::wire::field_names(&example, &mut fields);
        for f in fields {
            if !names_word(&section, &f) {
                missing.push(format!("{schema}: field `{f}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README \"File formats\" lacks:\n{}",
        missing.join("\n")
    );
}
