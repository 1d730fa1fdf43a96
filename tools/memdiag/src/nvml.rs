//! Reading the report from the driver through NVML (libnvidia-ml, loaded at run
//! time, so memdiag runs on machines without a driver). In bottom's spirit:
//! NVML is initialised once, each field is read on its own, and a field that
//! fails is recorded in `unavailable` with the reason instead of dropping the
//! GPU or the report.

use crate::watch::Sample;
use common::report::{Gpu, Memory, Process, ProcessKind, Report, Source, Utilization};
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};
use std::collections::BTreeMap;

use common::estimate::whole_mib;

/// A live NVML session, or the reason there is none.
pub enum Session {
    Ready(Box<Nvml>),
    Unavailable(String),
}

impl Session {
    pub fn open() -> Session {
        match Nvml::init() {
            Ok(nvml) => Session::Ready(Box::new(nvml)),
            Err(NvmlError::LibloadingError(e)) => Session::Unavailable(format!(
                "NVML not available: cannot load libnvidia-ml.so.1 ({e}); no NVIDIA driver on this machine"
            )),
            Err(NvmlError::DriverNotLoaded) => {
                Session::Unavailable("NVML: the NVIDIA driver is not loaded".to_string())
            }
            Err(e) => Session::Unavailable(format!("NVML failed to initialise: {e}")),
        }
    }

    /// Takes one report. Never fails: whatever cannot be read becomes a note.
    pub fn report(&self) -> Report {
        let mut report = Report::new(Source::Nvml);
        let nvml = match self {
            Session::Ready(nvml) => nvml,
            Session::Unavailable(why) => {
                report.notes.push(why.clone());
                return report;
            }
        };
        match nvml.sys_driver_version() {
            Ok(v) => report.driver_version = Some(v),
            Err(e) => report.notes.push(format!("driver_version: {}", reason(&e))),
        }
        match nvml.sys_cuda_driver_version() {
            Ok(v) => report.cuda_driver_version = Some(format!("{}.{}", v / 1000, (v % 1000) / 10)),
            Err(e) => report
                .notes
                .push(format!("cuda_driver_version: {}", reason(&e))),
        }
        let count = match nvml.device_count() {
            Ok(n) => n,
            Err(e) => {
                report
                    .notes
                    .push(format!("cannot count GPUs: {}", reason(&e)));
                return report;
            }
        };
        if count == 0 {
            report
                .notes
                .push("NVML answers but sees no GPU".to_string());
        }
        for index in 0..count {
            report.gpus.push(read_gpu(nvml, index));
        }
        report
    }
}

/// Why a call failed, in the words the report uses.
fn reason(e: &NvmlError) -> String {
    match e {
        NvmlError::NotSupported => "not supported".to_string(),
        NvmlError::FailedToLoadSymbol(s) => format!("not offered by this driver ({s})"),
        e => e.to_string(),
    }
}

/// Stores a field's value, or its reason in `unavailable`.
fn field<T>(
    unavailable: &mut BTreeMap<String, String>,
    name: &str,
    r: Result<T, NvmlError>,
) -> Option<T> {
    r.map_err(|e| unavailable.insert(name.to_string(), reason(&e)))
        .ok()
}

fn read_gpu(nvml: &Nvml, index: u32) -> Gpu {
    let mut gpu = Gpu::new(index);
    let device = match nvml.device_by_index(index) {
        Ok(d) => d,
        Err(e) => {
            gpu.notes
                .push(format!("cannot open this GPU: {}", reason(&e)));
            return gpu;
        }
    };
    let u = &mut gpu.unavailable;
    gpu.name = field(u, "name", device.name());
    gpu.uuid = field(u, "uuid", device.uuid());
    gpu.memory = field(u, "memory", memory(nvml, &device));
    gpu.utilization = field(u, "utilization", device.utilization_rates()).map(|r| Utilization {
        gpu_pct: r.gpu,
        memory_pct: r.memory,
    });
    gpu.temperature_c = field(
        u,
        "temperature_c",
        device.temperature(TemperatureSensor::Gpu),
    );
    gpu.persistence_mode = field(u, "persistence_mode", device.is_in_persistent_mode());
    gpu.retired_pages_pending = field(
        u,
        "retired_pages_pending",
        device.are_pages_pending_retired(),
    );
    gpu.remapping_failed = field(u, "remapping_failed", remapping_failed(nvml, &device));
    gpu.mig_enabled = field(u, "mig_enabled", device.mig_mode().map(|m| m.current == 1));
    gpu.processes = match processes(nvml, &device, gpu.mig_enabled == Some(true)) {
        Ok((list, notes)) => {
            gpu.notes.extend(notes);
            Some(list)
        }
        Err(e) => {
            gpu.unavailable.insert("processes".to_string(), reason(&e));
            gpu.notes.push(
                "the process list could not be read (permissions, a container, or MIG); memory figures above are still the GPU's"
                    .to_string(),
            );
            None
        }
    };
    gpu
}

/// nvml-wrapper calls only nvmlDeviceGetMemoryInfo_v2, which drivers before
/// R510 lack; those get the v1 call.
fn memory(nvml: &Nvml, device: &Device) -> Result<Memory, NvmlError> {
    let (total, used, free) = match device.memory_info() {
        Ok(m) => (m.total, m.used, m.free),
        Err(NvmlError::FailedToLoadSymbol(_)) => {
            let sym = nvml_sym(nvml.lib().nvmlDeviceGetMemoryInfo.as_ref())?;
            // SAFETY: v1 signature from nvml.h; the handle is live for `device`.
            unsafe {
                let mut m: nvml_wrapper_sys::bindings::nvmlMemory_t = std::mem::zeroed();
                nvml_try(sym(device.handle(), &mut m))?;
                (m.total, m.used, m.free)
            }
        }
        Err(e) => return Err(e),
    };
    Ok(Memory {
        total_mib: whole_mib(total),
        used_mib: whole_mib(used),
        free_mib: whole_mib(free),
    })
}

/// nvml-wrapper has no call for nvmlDeviceGetRemappedRows (Ampere and later).
fn remapping_failed(nvml: &Nvml, device: &Device) -> Result<bool, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetRemappedRows.as_ref())?;
    let (mut corr, mut unc, mut pending, mut failed) = (0, 0, 0, 0);
    // SAFETY: signature from nvml.h; four out-parameters of unsigned int.
    unsafe {
        nvml_try(sym(
            device.handle(),
            &mut corr,
            &mut unc,
            &mut pending,
            &mut failed,
        ))?
    };
    Ok(failed != 0)
}

/// Compute and graphics processes merged by pid. The `_v2` calls are used
/// first: their struct never changed, while nvml-wrapper's `_v3` call passes
/// the v2 struct to a symbol whose struct grew on newer drivers, misreading
/// entries. `_v3` is the fallback for drivers that drop `_v2`. With MIG on,
/// the parent handle lists nothing, so each MIG instance is asked in turn.
fn processes(
    nvml: &Nvml,
    device: &Device,
    mig: bool,
) -> Result<(Vec<Process>, Vec<String>), NvmlError> {
    let mut notes = Vec::new();
    let mut infos: Vec<(ProcessInfo, ProcessKind)> = Vec::new();
    let mut handles = vec![];
    if mig {
        let n = device.mig_device_count()?;
        for i in 0..n {
            handles.push(device.mig_device_by_index(i)?);
        }
        notes.push(format!("MIG on: processes listed from {n} MIG device(s)"));
    }
    let list_from: Vec<&Device> = if mig {
        handles.iter().collect()
    } else {
        vec![device]
    };
    for d in list_from {
        let (compute, fell_back) = with_fallback(d.running_compute_processes_v2(), || {
            d.running_compute_processes()
        })?;
        let (graphics, _) = with_fallback(d.running_graphics_processes_v2(), || {
            d.running_graphics_processes()
        })?;
        if fell_back {
            notes.push("process list read with the _v3 call (no _v2 in this driver)".to_string());
        }
        infos.extend(compute.into_iter().map(|p| (p, ProcessKind::Compute)));
        infos.extend(graphics.into_iter().map(|p| (p, ProcessKind::Graphics)));
    }
    let mut merged: BTreeMap<(u32, Option<u32>), Process> = BTreeMap::new();
    for (info, kind) in infos {
        let used = match info.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some(whole_mib(b)),
            UsedGpuMemory::Unavailable => None,
        };
        merged
            .entry((info.pid, info.gpu_instance_id))
            .and_modify(|p| {
                if p.kind != kind {
                    p.kind = ProcessKind::Both;
                }
            })
            .or_insert_with(|| Process {
                pid: info.pid,
                // NVML reports host PIDs; inside a container the name lookup
                // fails, which leaves the name null rather than wrong.
                name: nvml.sys_process_name(info.pid, 256).ok(),
                used_mib: used,
                kind,
                gpu_instance: info.gpu_instance_id,
            });
    }
    Ok((merged.into_values().collect(), notes))
}

fn with_fallback<T>(
    first: Result<T, NvmlError>,
    second: impl FnOnce() -> Result<T, NvmlError>,
) -> Result<(T, bool), NvmlError> {
    match first {
        Err(NvmlError::FailedToLoadSymbol(_)) => second().map(|v| (v, true)),
        other => other.map(|v| (v, false)),
    }
}

impl Session {
    /// The few figures `--watch` records, without the per-process work.
    pub fn sample(&self) -> Vec<Sample> {
        let Session::Ready(nvml) = self else {
            return Vec::new();
        };
        let count = nvml.device_count().unwrap_or(0);
        (0..count)
            .map(|index| {
                let device = nvml.device_by_index(index).ok();
                let mem = device.as_ref().and_then(|d| memory(nvml, d).ok());
                Sample {
                    index,
                    used_mib: mem.map(|m| m.used_mib),
                    free_mib: mem.map(|m| m.free_mib),
                    utilization_gpu_pct: device
                        .as_ref()
                        .and_then(|d| d.utilization_rates().ok())
                        .map(|u| u.gpu),
                }
            })
            .collect()
    }
}
