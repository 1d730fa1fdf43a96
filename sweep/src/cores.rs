//! The cores free when a trial starts, so that its threads come from them
//! rather than from the cores that exist: one trial given 2 threads on 2
//! cores another job kept busy ran 4 times slower than with one (issue 42).
//!
//! Free is /proc/stat's idle time over the last second or more (a quarter
//! second for the sweep's first trial, so that a worker joining a study is
//! not kept waiting), of the CPUs this process may run on, plus the time our own processes (this
//! sweep and everything under it: its trials, and those it has reaped)
//! kept busy: our trials' cores are ours to share out again. The readings
//! are I/O (`read`); what they mean is pure (`free_cores`, the parsers),
//! and the threads a trial gets are placement's (`placement::free_threads`).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// The least time a reading of free cores spans.
pub const WINDOW: Duration = Duration::from_secs(1);
/// The least it spans at the sweep's start: /proc/stat counts in hundredths
/// of a second, so a quarter second still tells cores apart, and the first
/// trial starts without waiting out a whole window.
pub const FIRST_WINDOW: Duration = Duration::from_millis(250);

/// Clock ticks at one moment: the CPUs' idle and total time (the CPUs this
/// process may run on), and our own processes' CPU time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    pub at: Instant,
    pub idle: u64,
    pub total: u64,
    pub ours: u64,
    /// The CPUs counted.
    pub cpus: usize,
}

/// The cores free between two readings, and over how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Free {
    pub cores: f64,
    /// The CPUs counted.
    pub cpus: usize,
    pub seconds: f64,
}

/// Between `a` and the later `b`: idle plus our own share of the time the
/// CPUs counted, in cores; None when no time was counted.
pub fn free_cores(a: &Reading, b: &Reading) -> Option<Free> {
    let total = b.total.checked_sub(a.total).filter(|t| *t > 0)?;
    let idle = b.idle.saturating_sub(a.idle);
    // Our processes' ticks that ended before `a` was read and were reaped
    // after it move into a parent's count: never more than all the time.
    let ours = b.ours.saturating_sub(a.ours);
    let share = ((idle + ours) as f64 / total as f64).clamp(0.0, 1.0);
    Some(Free {
        cores: share * b.cpus as f64,
        cpus: b.cpus,
        seconds: b.at.saturating_duration_since(a.at).as_secs_f64(),
    })
}

/// /proc/stat's per-CPU lines (`cpuN user nice system idle iowait irq
/// softirq steal ...`) of the CPUs in `allowed` (None: all), summed: idle
/// (with iowait: a CPU waiting on I/O runs nothing) and total, and how
/// many CPUs were counted.
pub fn parse_stat(text: &str, allowed: Option<&[usize]>) -> Option<(u64, u64, usize)> {
    let (mut idle, mut total, mut cpus) = (0u64, 0u64, 0usize);
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(n) = words
            .next()
            .and_then(|w| w.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if allowed.is_some_and(|a| !a.contains(&n)) {
            continue;
        }
        // guest and guest_nice are already in user and nice.
        let ticks: Vec<u64> = words.take(8).filter_map(|w| w.parse().ok()).collect();
        if ticks.len() < 5 {
            continue;
        }
        idle += ticks[3] + ticks[4];
        total += ticks.iter().sum::<u64>();
        cpus += 1;
    }
    (cpus > 0).then_some((idle, total, cpus))
}

/// A CPU list as /proc/self/status's `Cpus_allowed_list` writes it
/// (`0-3,8,10-11`).
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.trim().parse::<usize>().ok()?..=b.trim().parse().ok()?),
            None => out.push(part.trim().parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

/// From /proc/PID/stat: its parent and its CPU ticks, its own (utime,
/// stime) and its reaped children's (cutime, cstime). Fields are read
/// after the command's last `)`, which may hold spaces.
pub fn parse_pid_stat(text: &str) -> Option<(u32, u64)> {
    let (_, rest) = text.rsplit_once(") ")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): ppid is 4, utime..cstime are 14..17.
    let ppid = f.get(1)?.parse().ok()?;
    let ticks = (11..15)
        .map(|i| f.get(i).and_then(|v| v.parse::<i64>().ok()))
        .sum::<Option<i64>>()?;
    Some((ppid, ticks.max(0) as u64))
}

/// The ticks of `root` and its descendants, from each process's parent.
pub fn tree_ticks(root: u32, procs: &BTreeMap<u32, (u32, u64)>) -> u64 {
    let mut ours = vec![root];
    let mut sum = procs.get(&root).map_or(0, |p| p.1);
    // Parents before children is not promised: repeat until nothing new.
    loop {
        let before = ours.len();
        for (pid, (ppid, ticks)) in procs {
            if ours.contains(ppid) && !ours.contains(pid) {
                ours.push(*pid);
                sum += ticks;
            }
        }
        if ours.len() == before {
            return sum;
        }
    }
}

/// A reading now (None where /proc/stat cannot be read).
pub fn read() -> Option<Reading> {
    let at = Instant::now();
    let allowed = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(parse_cpu_list)
        });
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let (idle, total, cpus) = parse_stat(&stat, allowed.as_deref())?;
    let mut procs = BTreeMap::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(p) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| parse_pid_stat(&t))
        {
            procs.insert(pid, p);
        }
    }
    Some(Reading {
        at,
        idle,
        total,
        ours: tree_ticks(std::process::id(), &procs),
        cpus,
    })
}

/// The readings a sweep keeps, at least a `WINDOW` apart, so that a trial
/// starting now is placed by the last second or more without waiting.
pub struct Watch {
    readings: VecDeque<Reading>,
}

impl Watch {
    /// Starts with a reading now (at the sweep's start: its set-up counts
    /// towards the first window).
    pub fn start() -> Watch {
        Watch {
            readings: read().into_iter().collect(),
        }
    }

    /// One more reading when the newest is a window old (the driver calls
    /// this at each look, a second apart at most while trials run).
    pub fn look(&mut self) {
        if self
            .readings
            .back()
            .is_none_or(|r| r.at.elapsed() >= WINDOW)
        {
            self.push(read());
        }
    }

    /// The cores free over the last window or more: now against the newest
    /// reading a window old; at the sweep's start, against its first
    /// reading once `FIRST_WINDOW` has passed (waiting out what is left of
    /// it). None: /proc/stat cannot be read.
    pub fn free(&mut self) -> Option<Free> {
        let first = self.readings.front()?.at;
        let wait = FIRST_WINDOW.saturating_sub(first.elapsed());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        let now = read()?;
        let base = base(&self.readings, now.at)?;
        let free = free_cores(&base, &now);
        self.push(Some(now));
        free
    }

    /// Keeps `r`, dropping readings a later `free` can no longer choose:
    /// one whose successor is already a window older than `r`.
    fn push(&mut self, r: Option<Reading>) {
        let Some(r) = r else { return };
        self.readings.push_back(r);
        while self.readings.len() > 1 && self.readings[1].at + WINDOW <= r.at {
            self.readings.pop_front();
        }
    }
}

/// The reading `free` measures from at `now`: the newest a window old, or
/// the oldest kept while none is (the sweep's start) once it is
/// `FIRST_WINDOW` old.
fn base(readings: &VecDeque<Reading>, now: Instant) -> Option<Reading> {
    let age = |r: &Reading| now.saturating_duration_since(r.at);
    readings
        .iter()
        .rev()
        .find(|r| age(r) >= WINDOW)
        .or_else(|| readings.front().filter(|r| age(r) >= FIRST_WINDOW))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  300 0 100 1500 100 0 0 0 0 0
cpu0 100 0 50 800 50 0 0 0 0 0
cpu1 200 0 50 700 50 0 0 0 0 0
intr 12345
ctxt 999
";

    #[test]
    fn proc_stat_counts_the_cpus_this_process_may_use() {
        assert_eq!(parse_stat(STAT, None), Some((1600, 2000, 2)));
        assert_eq!(parse_stat(STAT, Some(&[1])), Some((750, 1000, 1)));
        assert_eq!(parse_stat(STAT, Some(&[5])), None);
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn a_process_line_gives_its_parent_and_all_its_ticks() {
        // The command holds `) ` and spaces; utime 10, stime 5, cutime 100, cstime 7.
        let line =
            "4242 (python (x) y) S 4000 4242 4242 0 -1 4194304 100 0 0 0 10 5 100 7 20 0 3 0 99";
        assert_eq!(parse_pid_stat(line), Some((4000, 122)));
        let procs: BTreeMap<u32, (u32, u64)> = [
            (1, (0, 1000)),
            (10, (1, 5)),
            (11, (10, 20)),
            (12, (11, 30)),
            (13, (1, 400)),
        ]
        .into();
        // The sweep (10), its trial (11) and the trial's child (12).
        assert_eq!(tree_ticks(10, &procs), 55);
    }

    fn at(base: Instant, ms: u64, idle: u64, total: u64, ours: u64) -> Reading {
        Reading {
            at: base + Duration::from_millis(ms),
            idle,
            total,
            ours,
            cpus: 2,
        }
    }

    #[test]
    fn free_is_idle_plus_what_our_own_trials_used() {
        let t = Instant::now();
        // Another job keeps both cores busy: nothing free.
        let f = free_cores(&at(t, 0, 0, 0, 0), &at(t, 1000, 4, 200, 0)).unwrap();
        assert!((f.cores - 0.04).abs() < 1e-9, "{f:?}");
        assert!((f.seconds - 1.0).abs() < 1e-9);
        // Our own trial keeps one busy, the other idles: both free to us.
        let f = free_cores(&at(t, 0, 0, 0, 0), &at(t, 1000, 100, 200, 100)).unwrap();
        assert!((f.cores - 2.0).abs() < 1e-9, "{f:?}");
        // Another job on one core, ours on the other: one.
        let f = free_cores(&at(t, 0, 0, 0, 0), &at(t, 1000, 0, 200, 100)).unwrap();
        assert!((f.cores - 1.0).abs() < 1e-9, "{f:?}");
        // No time counted: unknown.
        assert_eq!(free_cores(&at(t, 0, 5, 9, 0), &at(t, 1, 5, 9, 0)), None);
    }

    #[test]
    fn the_watch_keeps_what_a_later_start_may_measure_from() {
        let t = Instant::now();
        let mut w = Watch {
            readings: VecDeque::new(),
        };
        for ms in [0, 400, 900, 1300, 2500] {
            w.push(Some(at(t, ms, 0, 0, 0)));
        }
        // 1300 is a window older than nothing yet kept after it: from 2500
        // on, 1300 is the newest a window old, and 0..900 are never chosen.
        let kept: Vec<u64> = w
            .readings
            .iter()
            .map(|r| r.at.duration_since(t).as_millis() as u64)
            .collect();
        assert_eq!(kept, vec![1300, 2500]);
    }

    #[test]
    fn the_first_trial_is_measured_over_a_quarter_second_the_rest_over_a_second() {
        let t = Instant::now();
        let ms = |v: u64| t + Duration::from_millis(v);
        let from = |kept: &[u64], now: u64| {
            let r: VecDeque<Reading> = kept.iter().map(|m| at(t, *m, 0, 0, 0)).collect();
            base(&r, ms(now)).map(|r| r.at.duration_since(t).as_millis() as u64)
        };
        assert_eq!(from(&[0], 100), None);
        assert_eq!(from(&[0], 250), Some(0));
        // Before a second has passed, from the start: the longest there is.
        assert_eq!(from(&[0, 250], 600), Some(0));
        assert_eq!(from(&[0, 250], 1100), Some(0));
        assert_eq!(from(&[0, 250], 1400), Some(250));
    }

    #[test]
    fn this_machine_reads() {
        let a = read().expect("/proc/stat");
        assert!(a.cpus >= 1 && a.total > 0);
        let mut w = Watch {
            readings: [a].into(),
        };
        let f = w.free().unwrap();
        assert!(f.seconds >= FIRST_WINDOW.as_secs_f64(), "{f:?}");
        assert!((0.0..=a.cpus as f64).contains(&f.cores), "{f:?}");
    }
}
