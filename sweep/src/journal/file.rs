//! The journal file: the cached replay of its whole lines, appends under
//! the lock (one write, one fsync), and the cut of a torn last line.

use super::lock::SymlinkLock;
use super::records::scan;
use super::replay::Replay;
use super::Journal;
use anyhow::{bail, Context, Result};
use common::bad_input;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The replay of a journal file's first `offset` bytes, all whole lines. It
/// stays valid while the file (same device and inode) only grows: writers
/// only append, and a cut only removes a torn tail, which is never in here.
#[derive(Debug, Default)]
pub(super) struct Cache {
    pub(super) file: (u64, u64),
    pub(super) offset: u64,
    pub(super) lines: usize,
    /// The CRC-32 of those bytes (what a checkpoint of this replay names).
    pub(super) crc: crc32fast::Hasher,
    pub(super) state: Replay,
}

/// The most of the file read at once: large enough that the reading thread
/// (records.rs) runs beside the replay most of the time. Small in unit
/// tests, so that a journal of a few MB crosses blocks.
const BLOCK: u64 = if cfg!(test) { 1 << 20 } else { 8 << 20 };

impl Cache {
    /// Replays the whole lines of `bytes` (what follows `offset`); returns
    /// the torn tail after them. `at_eof`: `bytes` end where the file does
    /// (its last line, if not JSON, is torn, not bad).
    pub(super) fn extend<'b>(
        &mut self,
        bytes: &'b [u8],
        path: &Path,
        at_eof: bool,
    ) -> Result<&'b [u8]> {
        let (state, mut lines) = (&mut self.state, 0);
        let whole = scan(bytes, path, self.lines, at_eof, &mut |line, record| {
            lines += 1;
            state
                .apply(record)
                .map_err(|e| bad_input!("{}:{line}: {e}", path.display()))
        })?;
        self.offset += whole as u64;
        self.lines += lines;
        self.crc.update(&bytes[..whole]);
        Ok(&bytes[whole..])
    }

    /// Replays `file` from `offset` to its end a block at a time, so a
    /// large journal is never held whole in memory beside its replay;
    /// returns the torn tail. The last whole line of each block waits for
    /// the next, as only the file's last line may be torn.
    pub(super) fn extend_from(&mut self, file: &mut File, path: &Path) -> Result<Vec<u8>> {
        // Grown as read: the driver reads a few new lines at most turns.
        let mut carry = Vec::new();
        loop {
            let n = file
                .take(BLOCK)
                .read_to_end(&mut carry)
                .with_context(|| format!("reading the journal {}", path.display()))?;
            if n == 0 {
                return Ok(self.extend(&carry, path, true)?.to_vec());
            }
            let held = memchr::memrchr(b'\n', &carry);
            let ready = held.and_then(|last| memchr::memrchr(b'\n', &carry[..last]));
            if let Some(end) = ready {
                self.extend(&carry[..=end], path, false)?;
                carry.drain(..=end);
            }
        }
    }
}

impl Journal {
    /// The journal replayed, without the lock (a line being written is a
    /// torn tail, ignored).
    pub(super) fn read<R>(&self, f: impl FnOnce(&mut Replay) -> Result<R>) -> Result<R> {
        let mut file = File::open(&self.path)
            .with_context(|| format!("opening the journal {}", self.path.display()))?;
        let (mut cache, _) = self.replay(&mut file)?;
        let out = f(&mut cache.state);
        self.keep(cache);
        out
    }

    /// The journal replayed once, the replay handed over (the cache spent).
    pub(super) fn read_once(&self) -> Result<Replay> {
        let mut file = File::open(&self.path)
            .with_context(|| format!("opening the journal {}", self.path.display()))?;
        Ok(self.replay(&mut file)?.0.state)
    }

    /// The cached replay brought up to the end of `file`, and the torn tail.
    fn replay(&self, file: &mut File) -> Result<(Cache, Vec<u8>)> {
        use std::os::unix::fs::MetadataExt;
        let shown = self.path.display();
        let meta = file
            .metadata()
            .with_context(|| format!("stat of the journal {shown}"))?;
        let id = (meta.dev(), meta.ino());
        let taken = self.cache.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut cache = match taken.filter(|c| c.file == id && c.offset <= meta.len()) {
            Some(cache) => cache,
            None => self
                .start_from_checkpoint(file, meta.len())
                .unwrap_or_default(),
        };
        cache.file = id;
        file.seek(SeekFrom::Start(cache.offset))
            .with_context(|| format!("reading the journal {shown}"))?;
        let torn = cache.extend_from(file, &self.path)?;
        Ok((cache, torn))
    }

    fn keep(&self, cache: Cache) {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some(cache);
    }

    /// Under the lock: cuts a torn tail, replays, asks `decide` for the
    /// lines to write (one or more, joined by newlines; None: nothing to
    /// write), writes them in one write() and fsyncs, and hands the state
    /// with them applied to `result`.
    pub(super) fn append<R>(
        &self,
        decide: impl FnOnce(&mut Replay) -> Result<Option<String>>,
        result: impl FnOnce(&mut Replay) -> Result<R>,
    ) -> Result<R> {
        let lock = SymlinkLock::acquire(&self.lock_path, &self.lock_target, self.grace)?;
        let out = self.append_locked(decide, result);
        if let Err(e) = lock.release() {
            // Our line's place was checked after writing, so the state we
            // return is right; the other writer's may not be.
            common::say!(
                "warning: {}: {e:#} (a waiter took it as stale; keep each journal write short)",
                self.lock_path.display()
            );
        }
        out
    }

    fn append_locked<R>(
        &self,
        decide: impl FnOnce(&mut Replay) -> Result<Option<String>>,
        result: impl FnOnce(&mut Replay) -> Result<R>,
    ) -> Result<R> {
        let shown = self.path.display();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.path)
            .with_context(|| format!("opening the journal {shown}"))?;
        let (mut cache, torn) = self.replay(&mut file)?;
        if !torn.is_empty() {
            self.cut(&file, &torn, cache.offset)?;
        }
        let Some(line) = decide(&mut cache.state)? else {
            let out = result(&mut cache.state);
            self.keep(cache);
            return out;
        };
        let mut buf = line.into_bytes();
        buf.push(b'\n');
        // One write(): with O_APPEND the line lands whole at the end.
        let n = file
            .write(&buf)
            .with_context(|| format!("writing to the journal {shown}"))?;
        let end = file
            .stream_position()
            .with_context(|| format!("seeking in the journal {shown}"))?;
        let start = end - n as u64;
        if n < buf.len() {
            let _ = file.set_len(start).and_then(|()| file.sync_all());
            bail!(
                "{shown}: short write ({n} of {} bytes; disk full?): the record was not written",
                buf.len()
            );
        }
        file.sync_all().with_context(|| {
            format!("fsync of the journal {shown} failed: the last record may not be on disk")
        })?;
        if start == cache.offset {
            cache.extend(&buf, &self.path, true)?;
        } else {
            // Someone wrote between our read and our write (a broken lock):
            // replay what is really before and at our line.
            let mut bytes = vec![0; end as usize];
            file.seek(SeekFrom::Start(0))
                .and_then(|_| file.read_exact(&mut bytes))
                .with_context(|| format!("re-reading the journal {shown}"))?;
            cache = Cache {
                file: cache.file,
                ..Cache::default()
            };
            if !cache.extend(&bytes, &self.path, true)?.is_empty() {
                bail!("{shown}: a torn line before our record at byte {start}");
            }
        }
        let out = result(&mut cache.state);
        self.keep(cache);
        out
    }

    /// Cuts the torn tail at `whole`, keeping its bytes in `<journal>.torn`.
    fn cut(&self, file: &File, tail: &[u8], whole: u64) -> Result<()> {
        let shown = self.path.display();
        let mut torn = self.path.clone().into_os_string();
        torn.push(".torn");
        let torn = PathBuf::from(torn);
        let mut kept = tail.to_vec();
        if kept.last() != Some(&b'\n') {
            kept.push(b'\n');
        }
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&torn)
            .and_then(|mut f| f.write_all(&kept).and_then(|()| f.sync_all()))
            .with_context(|| format!("saving the torn tail of {shown} to {}", torn.display()))?;
        file.set_len(whole)
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cutting the torn tail of {shown}"))?;
        common::say!(
            "warning: {shown}: cut a torn last line ({} bytes, kept in {})",
            tail.len(),
            torn.display()
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use super::super::{Journal, Outcome, StudyId, TrialId, TrialRef};
    use crate::trial::Direction;
    use std::fs::OpenOptions;
    use std::io::Write;

    #[test]
    fn a_torn_tail_is_ignored_then_cut_and_kept_aside() {
        let t = trial(0);
        let (d, j) = journal_with(&[STUDY, &t]);
        let mut f = OpenOptions::new().append(true).open(j.path()).unwrap();
        f.write_all(br#"{"op_code":4,"worker_id":"w","stu"#)
            .unwrap();
        assert_eq!(j.load("s").unwrap().unwrap().trials.len(), 1);
        let r = j.create_running_trial(StudyId(0), &record(0.01)).unwrap();
        assert_eq!(
            r,
            TrialRef {
                id: TrialId(1),
                number: 1
            }
        );
        let text = std::fs::read_to_string(j.path()).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(!text.contains("\"stu\n"));
        let torn = std::fs::read_to_string(d.path().join("journal.log.torn")).unwrap();
        assert_eq!(torn, "{\"op_code\":4,\"worker_id\":\"w\",\"stu\n");

        // A last whole line that is not JSON is torn too.
        f.write_all(b"\0\0\0\0\n").unwrap();
        assert_eq!(j.load("s").unwrap().unwrap().trials.len(), 2);
        j.finish_trial(r.id, Outcome::Complete(0.5)).unwrap();
        assert_eq!(j.load("s").unwrap().unwrap().trials[1].value, Some(0.5));
    }

    #[test]
    fn the_cached_replay_follows_other_writers_and_a_replaced_file() {
        let (d, a) = journal_with(&[]);
        let b = Journal::open(a.path()).unwrap();
        let s = a.create_study("s", Direction::Minimize).unwrap();
        for i in 0..3 {
            let (mine, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
            let r = mine.create_running_trial(s, &record(0.01)).unwrap();
            assert_eq!(r.number, 2 * i);
            assert_eq!(
                other.create_running_trial(s, &record(0.02)).unwrap().number,
                2 * i + 1
            );
        }
        assert_eq!(a.load("s").unwrap().unwrap().trials.len(), 6);
        // A new file in its place (another inode) is replayed from scratch.
        let fresh = d.path().join("fresh.log");
        std::fs::write(&fresh, format!("{STUDY}\n{}\n", trial(0))).unwrap();
        std::fs::rename(&fresh, a.path()).unwrap();
        assert_eq!(a.load("s").unwrap().unwrap().trials.len(), 1);
        // Line numbers go on from the cached part.
        let mut f = OpenOptions::new().append(true).open(a.path()).unwrap();
        f.write_all(b"{\"op_code\":99,\"worker_id\":\"w\"}\n")
            .unwrap();
        let e = format!("{:#}", a.load("s").unwrap_err());
        assert!(e.contains("journal.log:3: unknown op_code 99"), "{e}");
    }
}
