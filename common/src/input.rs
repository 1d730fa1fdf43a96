//! Reading a whole input file (or stdin) as text, with a size cap so that a
//! wrong file given by mistake fails fast with a message instead of eating RAM.

use crate::bad_input;
use std::io::Read;
use std::path::Path;

/// Largest input any tool reads whole: reports, configs, tier tables.
pub const MAX_INPUT_BYTES: u64 = 4 * 1024 * 1024;

/// A text input and the name to use for it in messages.
pub struct Input {
    pub name: String,
    pub text: String,
}

/// Reads `path`, or stdin when `path` is `-`.
pub fn read(path: &Path) -> anyhow::Result<Input> {
    if path == Path::new("-") {
        return read_from("<stdin>", std::io::stdin().lock());
    }
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| bad_input!("{name}: cannot open: {e}"))?;
    read_from(&name, file)
}

/// Reads at most `MAX_INPUT_BYTES` from `reader`, checking it is UTF-8 text.
pub fn read_from(name: &str, reader: impl Read) -> anyhow::Result<Input> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad_input!("{name}: cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(bad_input!(
            "{name}: larger than {} MiB; expected a small YAML, JSON or CSV file",
            MAX_INPUT_BYTES / (1024 * 1024)
        ));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        bad_input!(
            "{name}: not text (invalid UTF-8 at byte {}); expected YAML, JSON or CSV",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(Input {
        name: name.to_string(),
        text,
    })
}
