//! A supervised command's memory, its whole process tree sampled every
//! period on a thread: host memory as PSS from /proc/PID/smaps_rollup (the
//! pages every `import torch` shares count once, not once per process;
//! RSS kept beside it), and on a GPU the memory NVML attributes to the
//! tree's pids. Rows go to memory.csv (supervise-memory/v2) as they are
//! taken, so a killed supervisor leaves a readable file. A launcher's job of
//! ranks adds a row per rank to each sample: the processes whose
//! environment says `RANK=N` (torch.distributed.elastic sets it in each
//! rank's, and a rank's own children, DataLoader workers, inherit it).

mod plot;

pub use plot::plot;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// memory.csv's header (supervise-memory/v2: v1's columns, then `rank`,
/// empty on the whole tree's row).
pub const HEADER: &str = "seconds,host_pss_mib,host_rss_mib,processes,gpu_mib,rank\n";

/// The peaks so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Peaks {
    pub host_pss_mib: f64,
    pub host_rss_mib: f64,
    /// The tree's anonymous memory (smaps_rollup's `Anonymous`: heap,
    /// tensors): what one more copy of it adds; the file-backed pages
    /// (torch's libraries) copies share through the page cache.
    pub host_anon_mib: f64,
    /// The smallest address-space limit (RLIMIT_AS) its first process had
    /// while sampled, MiB; None: unlimited.
    pub address_limit_mib: Option<f64>,
    /// None where the GPU side was not measured (`gpu_note` says why).
    pub gpu_mib: Option<f64>,
    /// Each GPU's peak of the tree's memory on it, MiB, by NVML index: a job
    /// of ranks spread over a group of GPUs needs its largest on each.
    pub gpu_devices_mib: BTreeMap<u32, f64>,
    pub gpu_note: Option<String>,
    pub samples: u64,
    pub processes: u32,
    /// A job of ranks: each rank's own PSS peak, by rank.
    pub ranks: BTreeMap<u32, f64>,
}

impl Peaks {
    /// A sample's GPU memory (the tree's, or why not) and each GPU's share.
    fn add_gpu(&mut self, gpu: Option<Result<f64, String>>, devices: Option<BTreeMap<u32, f64>>) {
        match gpu {
            // A figure supersedes an earlier sample's why-not.
            Some(Ok(m)) => {
                self.gpu_mib = Some(self.gpu_mib.unwrap_or(0.0).max(m));
                self.gpu_note = None;
            }
            Some(Err(why)) if self.gpu_mib.is_none() => self.gpu_note = Some(why),
            _ => {}
        }
        for (d, m) in devices.into_iter().flatten() {
            let peak = self.gpu_devices_mib.entry(d).or_insert(m);
            *peak = peak.max(m);
        }
    }
}

/// The sampling thread of one process tree.
pub struct Sampler {
    peaks: Arc<Mutex<Peaks>>,
    /// Dropped (or sent to) to end the thread after one last sample.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// When the first samples are taken (from the start): a command that lives
/// a tenth of a second still has a peak; then every period.
const FIRST_SAMPLES_MS: [u64; 4] = [5, 30, 100, 250];

impl Sampler {
    /// Starts sampling the tree rooted at `pid` (and process group `pid`)
    /// every `period` after a few early samples, writing rows to `csv`
    /// (created with its header).
    pub fn start(pid: u32, csv: &Path, period: Duration) -> anyhow::Result<Sampler> {
        Sampler::start_with(pid, move || tree(pid), csv, period, false)
    }

    /// Starts sampling a supervised command's processes wherever they went
    /// (`Lineage::tree`, which records those outside its group as seen);
    /// `by_rank`: a launcher's job, each rank's rows too.
    pub fn start_for(
        lineage: Arc<crate::lineage::Lineage>,
        csv: &Path,
        period: Duration,
        by_rank: bool,
    ) -> anyhow::Result<Sampler> {
        let root = lineage.root();
        Sampler::start_with(root, move || lineage.tree(), csv, period, by_rank)
    }

    fn start_with(
        pid: u32,
        tree: impl Fn() -> Vec<u32> + Send + 'static,
        csv: &Path,
        period: Duration,
        by_rank: bool,
    ) -> anyhow::Result<Sampler> {
        let mut file =
            File::create(csv).map_err(|e| anyhow::anyhow!("creating {}: {e}", csv.display()))?;
        file.write_all(HEADER.as_bytes())?;
        let peaks = Arc::new(Mutex::new(Peaks::default()));
        let (tx, rx) = mpsc::channel();
        let p = peaks.clone();
        let ranks = by_rank.then(Ranks::default);
        let thread = std::thread::spawn(move || run(pid, &tree, file, period, &p, &rx, ranks));
        Ok(Sampler {
            peaks,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    /// The peaks so far.
    pub fn peaks(&self) -> Peaks {
        self.peaks.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Stops the thread (after its last sample) and returns the peaks.
    pub fn finish(mut self) -> Peaks {
        self.stop = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peaks()
    }
}

fn run(
    pid: u32,
    tree: &dyn Fn() -> Vec<u32>,
    mut csv: File,
    period: Duration,
    peaks: &Mutex<Peaks>,
    stop: &Receiver<()>,
    mut ranks: Option<Ranks>,
) {
    let started = Instant::now();
    // NVML loads after the first sample: its start must not delay it.
    let mut nvml: Option<Option<Nvml>> = None;
    let mut last = false;
    for n in 0usize.. {
        let pids = tree();
        // Each process read once a sample, the ranks' rows summed from the
        // same readings.
        let read: Vec<(u32, ProcessMemory)> = pids
            .iter()
            .filter_map(|p| pss_kib(*p).map(|m| (*p, m)))
            .collect();
        let (mut pss, mut rss, mut anon) = (0u64, 0u64, 0u64);
        for (_, m) in &read {
            (pss, rss, anon) = (pss + m.pss, rss + m.rss, anon + m.anon);
        }
        let seen = read.len() as u32;
        let limit = address_limit_mib(pid);
        let listed = nvml.as_ref().and_then(|n| n.as_ref().map(gpu_processes));
        let gpu = listed.as_ref().map(|l| gpu_mib(l, &pids));
        let devices = listed.as_ref().map(|l| by_device(l, &pids));
        if seen > 0 {
            let (pss, rss) = (pss as f64 / 1024.0, rss as f64 / 1024.0);
            let gpu_cell = match &gpu {
                Some(Ok(m)) => format!("{m:.1}"),
                _ => String::new(),
            };
            let seconds = started.elapsed().as_secs_f64();
            let _ = writeln!(csv, "{seconds:.3},{pss:.1},{rss:.1},{seen},{gpu_cell},");
            if let Some(r) = ranks.as_mut() {
                r.write(&mut csv, seconds, &read, listed.as_ref(), peaks);
            }
            if let Ok(mut p) = peaks.lock() {
                p.samples += 1;
                p.host_pss_mib = p.host_pss_mib.max(pss);
                p.host_rss_mib = p.host_rss_mib.max(rss);
                p.host_anon_mib = p.host_anon_mib.max(anon as f64 / 1024.0);
                if let Some(l) = limit {
                    p.address_limit_mib = Some(p.address_limit_mib.map_or(l, |m: f64| m.min(l)));
                }
                p.processes = p.processes.max(seen);
                p.add_gpu(gpu, devices);
            }
        }
        if nvml.is_none() {
            nvml = Some(start_nvml(peaks));
        }
        if last {
            return;
        }
        let next = match FIRST_SAMPLES_MS.get(n) {
            Some(ms) => started + Duration::from_millis(*ms),
            None => Instant::now() + period,
        };
        // A stop (or the sampler dropped) wakes the wait: one last sample.
        match stop.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => last = true,
        }
    }
}

/// Each rank's processes in a job of ranks: a process's rank read from its
/// environment until it has one, then kept. A process seen between a
/// launcher's fork and its exec still has the launcher's environment (no
/// RANK), so a rankless one is read again at the next sample.
#[derive(Default)]
struct Ranks {
    known: BTreeMap<u32, u32>,
}

impl Ranks {
    /// One row per rank among the processes `read` this sample: their
    /// PSS, RSS, count and GPU memory (of NVML's `listed` processes); each
    /// rank's PSS peak kept in `peaks`.
    fn write(
        &mut self,
        csv: &mut File,
        seconds: f64,
        read: &[(u32, ProcessMemory)],
        listed: Option<&Listed>,
        peaks: &Mutex<Peaks>,
    ) {
        self.known.retain(|p, _| read.iter().any(|(r, _)| r == p));
        let mut by_rank: BTreeMap<u32, Vec<(u32, &ProcessMemory)>> = BTreeMap::new();
        for (p, m) in read {
            let rank = self.known.get(p).copied().or_else(|| rank_of(*p));
            if let Some(r) = rank {
                self.known.insert(*p, r);
                by_rank.entry(r).or_default().push((*p, m));
            }
        }
        for (rank, members) in by_rank {
            let (mut pss, mut rss) = (0u64, 0u64);
            for (_, m) in &members {
                (pss, rss) = (pss + m.pss, rss + m.rss);
            }
            let seen = members.len();
            let pids: Vec<u32> = members.iter().map(|(p, _)| *p).collect();
            let gpu = match listed.map(|l| gpu_mib(l, &pids)) {
                Some(Ok(m)) => format!("{m:.1}"),
                _ => String::new(),
            };
            let (pss, rss) = (pss as f64 / 1024.0, rss as f64 / 1024.0);
            let _ = writeln!(csv, "{seconds:.3},{pss:.1},{rss:.1},{seen},{gpu},{rank}");
            if let Ok(mut p) = peaks.lock() {
                let peak = p.ranks.entry(rank).or_insert(pss);
                *peak = peak.max(pss);
            }
        }
    }
}

/// The rank a process's environment gives it (`RANK=N`), if any.
fn rank_of(pid: u32) -> Option<u32> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"RANK="))
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
}

/// NVML, or None with why in the peaks' note.
fn start_nvml(peaks: &Mutex<Peaks>) -> Option<Nvml> {
    match Nvml::init() {
        Ok(n) => Some(n),
        Err(e) => {
            if let Ok(mut p) = peaks.lock() {
                p.gpu_note = Some(format!("not available: NVML cannot be used ({e})"));
            }
            None
        }
    }
}

/// NVML's compute processes on every GPU (pid, bytes, the GPU's NVML
/// index), or why not.
type Listed = Result<Vec<(u32, Option<u64>, u32)>, String>;

/// The memory NVML attributes to `pids` among the processes it `listed`,
/// MiB (see [`attribute`]).
fn gpu_mib(listed: &Listed, pids: &[u32]) -> Result<f64, String> {
    let mine: BTreeSet<u32> = pids.iter().copied().collect();
    attribute(listed.as_ref().map_err(Clone::clone)?, &mine, |pid| {
        Path::new(&format!("/proc/{pid}")).exists()
    })
}

/// What NVML attributes to `pids` on each GPU that holds some of it, MiB,
/// by NVML index; empty where nothing is listed.
fn by_device(listed: &Listed, pids: &[u32]) -> BTreeMap<u32, f64> {
    let mut out = BTreeMap::new();
    for (pid, used, device) in listed.iter().flatten() {
        if let (true, Some(b)) = (pids.contains(pid), used) {
            *out.entry(*device).or_insert(0.0) += *b as f64 / (1024.0 * 1024.0);
        }
    }
    out
}

/// NVML's compute processes on every GPU, asked once a sample.
fn gpu_processes(nvml: &Nvml) -> Listed {
    let count = nvml.device_count().map_err(|e| format!("NVML: {e}"))?;
    let mut listed = Vec::new();
    for i in 0..count {
        let Ok(dev) = nvml.device_by_index(i) else {
            continue;
        };
        for p in dev.running_compute_processes().unwrap_or_default() {
            let used = match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => Some(b),
                UsedGpuMemory::Unavailable => None,
            };
            listed.push((p.pid, used, i));
        }
    }
    Ok(listed)
}

/// What NVML's compute processes (`listed`: pid, bytes) attribute to the
/// tree `mine`, MiB. A tree that holds none has 0 (it has not touched the
/// GPU yet, or never does, while other jobs share the card), unless none of
/// the listed pids exists here (`visible`): then NVML reports pids from
/// another pid namespace (a container's), and Err says it is not measured.
fn attribute(
    listed: &[(u32, Option<u64>, u32)],
    mine: &BTreeSet<u32>,
    visible: impl Fn(u32) -> bool,
) -> Result<f64, String> {
    let ours: u64 = listed
        .iter()
        .filter(|(pid, _, _)| mine.contains(pid))
        .filter_map(|(_, used, _)| *used)
        .sum();
    if ours == 0 && !listed.is_empty() && !listed.iter().any(|(pid, _, _)| visible(*pid)) {
        return Err(
            "NVML lists GPU processes whose pids do not exist here (a container's pid namespace?): not measured".into(),
        );
    }
    Ok(ours as f64 / (1024.0 * 1024.0))
}

/// A process as /proc/PID/stat gives it: its parent, its process group and
/// its start time (clock ticks since boot: with the pid, which process).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Proc {
    pub ppid: u32,
    pub pgrp: u32,
    pub start: u64,
}

/// Every process /proc lists now, zombies left out.
pub fn snapshot() -> BTreeMap<u32, Proc> {
    let mut procs = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(p) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| parse_stat(&t))
            {
                procs.insert(pid, p);
            }
        }
    }
    procs
}

/// `root`, its descendants (by parent pid) and the members of its process
/// group, from /proc.
pub fn tree(root: u32) -> Vec<u32> {
    tree_in(&snapshot(), &[root])
}

/// In `procs`: the `roots`, the members of their process groups, and all
/// their descendants (by parent pid).
pub fn tree_in(procs: &BTreeMap<u32, Proc>, roots: &[u32]) -> Vec<u32> {
    let mut out: BTreeSet<u32> = procs
        .iter()
        .filter(|(pid, p)| roots.contains(pid) || roots.contains(&p.pgrp))
        .map(|(pid, _)| *pid)
        .collect();
    // Descendants: repeat until nothing new (a tree is shallow).
    loop {
        let before = out.len();
        for (pid, p) in procs {
            if out.contains(&p.ppid) {
                out.insert(*pid);
            }
        }
        if out.len() == before {
            break;
        }
    }
    out.into_iter().collect()
}

/// A /proc/PID/stat line; None for a zombie. The command name may hold
/// spaces and parentheses, so fields are read after its last `)`.
pub(crate) fn parse_stat(text: &str) -> Option<Proc> {
    let (_, rest) = text.rsplit_once(") ")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); ppid 4, pgrp 5, starttime 22.
    if *f.first()? == "Z" {
        return None;
    }
    Some(Proc {
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// One process's memory, KiB.
pub struct ProcessMemory {
    pub pss: u64,
    pub rss: u64,
    /// Anonymous pages (heap, tensors): not shared through a file.
    pub anon: u64,
}

/// PSS, RSS and anonymous memory in KiB from /proc/PID/smaps_rollup; None when the
/// process is gone (or not ours to read).
pub fn pss_kib(pid: u32) -> Option<ProcessMemory> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some(ProcessMemory {
        pss: field("Pss:")?,
        rss: field("Rss:")?,
        anon: field("Anonymous:").unwrap_or(0),
    })
}

/// The soft address-space limit (RLIMIT_AS) of `pid`, MiB, from
/// /proc/PID/limits; None when unlimited or unreadable.
pub fn address_limit_mib(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max address space"))?;
    let soft = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?;
    soft.parse::<f64>().ok().map(|b| b / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn nvml_figures_are_summed_over_the_tree_and_others_are_not_ours() {
        let mine: BTreeSet<u32> = [10, 11].into();
        let all = |_| true;
        // The tree's two processes, beside another job on the card.
        let listed = [
            (10, Some(GIB), 0),
            (11, Some(GIB / 2), 1),
            (99, Some(70 * GIB), 0),
        ];
        assert_eq!(attribute(&listed, &mine, all), Ok(1536.0));
        // Each GPU's share: a rank on each of two.
        let each = by_device(&Ok(listed.to_vec()), &[10, 11]);
        assert_eq!(each, [(0, 1024.0), (1, 512.0)].into());
        // Before the tree opens its CUDA context, beside that job: 0, not
        // "not measured" (the GPU run's trials started so beside a ballast).
        assert_eq!(attribute(&[(99, Some(70 * GIB), 0)], &mine, all), Ok(0.0));
        // Nothing on the card at all.
        assert_eq!(attribute(&[], &mine, all), Ok(0.0));
        // A process NVML cannot size counts nothing.
        assert_eq!(attribute(&[(10, None, 0)], &mine, all), Ok(0.0));
    }

    #[test]
    fn pids_from_another_namespace_are_not_a_measurement() {
        let mine: BTreeSet<u32> = [10].into();
        let none_here = |_| false;
        let e = attribute(&[(4242, Some(GIB), 0)], &mine, none_here).unwrap_err();
        assert!(e.contains("pid namespace"), "{e}");
        // Ours among them: measured, whatever else is listed.
        assert_eq!(
            attribute(&[(10, Some(GIB), 0)], &mine, |p| p == 10),
            Ok(1024.0)
        );
    }
}
