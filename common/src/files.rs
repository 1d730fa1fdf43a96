//! Files that matter are never left half-written: a whole file is written to
//! a temp file beside it, fsynced, renamed over the old one, and the
//! directory fsynced (`write_atomic`), so a kill at any moment leaves the old
//! file or the new one. Append-only logs cut a torn last line before they
//! append again (`cut_torn_tail`).

use anyhow::Context;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_with(path, |tmp| {
        let mut f = File::create(tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(bytes)
            .with_context(|| format!("writing {}", tmp.display()))?;
        Ok(())
    })
}

/// Writes `value` as YAML to `path` atomically (summary.yaml, chain.yaml,
/// sweep.yaml, ...).
pub fn write_yaml(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    write_atomic(path, serde_yaml::to_string(value)?.as_bytes())
}

/// Has `write` fill a temp file beside `path` (for writers that want a path,
/// such as an image encoder), then fsyncs it, renames it over `path` and
/// fsyncs the directory. The temp file keeps `path`'s extension, so writers
/// that pick a format from it still do.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    write_atomic_via(path, &temp_beside(path)?, write)
}

/// `write_atomic_with` through the temp file `tmp` (beside `path`): for a
/// file several processes may write at once, each through its own.
pub fn write_atomic_via(
    path: &Path,
    tmp: &Path,
    write: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let dir = parent_dir(path);
    let done = write(tmp).and_then(|()| {
        File::open(tmp)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("syncing {}", tmp.display()))?;
        std::fs::rename(tmp, path).with_context(|| format!("renaming into {}", path.display()))
    });
    if done.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    // Name the file the user knows, and say the old one is intact.
    done.with_context(|| match path.exists() {
        true => format!(
            "{}: not written; the previous one is intact",
            path.display()
        ),
        false => format!("{}: not written", path.display()),
    })?;
    sync_dir(dir);
    Ok(())
}

/// The directory `path` is in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `.NAME.tmp.EXT` beside `path`.
fn temp_beside(path: &Path) -> anyhow::Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?
        .to_string_lossy();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    Ok(parent_dir(path).join(format!(".{name}.tmp{ext}")))
}

/// fsync of a directory, so a rename in it survives a crash of the host.
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Cuts a last line that has no newline (left by a writer killed mid-line)
/// from a file opened for reading and writing; returns the bytes cut.
pub fn cut_torn_tail(file: &mut File) -> std::io::Result<u64> {
    let mut text = Vec::new();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_end(&mut text)?;
    let keep = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) as u64;
    let cut = text.len() as u64 - keep;
    if cut > 0 {
        file.set_len(keep)?;
        file.sync_all()?;
    }
    file.seek(SeekFrom::End(0))?;
    Ok(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_replace_whole_and_leave_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.yaml");
        write_atomic(&p, b"one\n").unwrap();
        write_atomic(&p, b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two\n");
        let png = dir.path().join("c.png");
        write_atomic_with(&png, |tmp| {
            assert_eq!(tmp.extension().unwrap(), "png");
            std::fs::write(tmp, b"x")?;
            Ok(())
        })
        .unwrap();
        // A writer that fails leaves the old file and no temp file.
        let failed = write_atomic_with(&p, |tmp| {
            std::fs::write(tmp, b"half")?;
            anyhow::bail!("disk full")
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two\n");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
    }

    #[test]
    fn a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        std::fs::write(&p, "a\nb\nhal").unwrap();
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        assert_eq!(cut_torn_tail(&mut f).unwrap(), 3);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a\nb\n");
        assert_eq!(cut_torn_tail(&mut f).unwrap(), 0);
    }
}
