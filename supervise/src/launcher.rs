//! The launchers that start a job of several processes (ranks): torchrun
//! and its module form, accelerate's and DeepSpeed's. Pure: read from the
//! command line.

use std::path::Path;

/// The launcher a command starts with, by the name its docs give it; None
/// for a plain command.
pub fn of(argv: &[String]) -> Option<&'static str> {
    let name = |w: &String| {
        Path::new(w)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let first = name(argv.first()?);
    match first.as_str() {
        "torchrun" => return Some("torchrun"),
        "deepspeed" => return Some("deepspeed"),
        "accelerate" if argv.get(1).is_some_and(|w| w == "launch") => {
            return Some("accelerate launch")
        }
        _ => {}
    }
    // python[3[.N]] [options] -m torch.distributed.run|launch
    if !first.starts_with("python") {
        return None;
    }
    // Python's own options come before the script or module: `-m` after
    // the script is the script's.
    let mut words = argv[1..].iter();
    let mut module = None;
    while let Some(w) = words.next() {
        match w.as_str() {
            "-m" => {
                module = words.next().map(String::as_str);
                break;
            }
            "-X" | "-W" => {
                words.next();
            }
            o if o.starts_with('-') && o != "-c" && o != "-" => {}
            _ => break,
        }
    }
    match module {
        Some("torch.distributed.run") => Some("torch.distributed.run"),
        Some("torch.distributed.launch") => Some("torch.distributed.launch"),
        Some("accelerate.commands.launch") => Some("accelerate launch"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of_words(cmd: &str) -> Option<&'static str> {
        of(&cmd.split(' ').map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn the_launchers_are_told_from_a_plain_command() {
        assert_eq!(
            of_words("torchrun --nproc_per_node 2 t.py"),
            Some("torchrun")
        );
        assert_eq!(of_words("/venv/bin/torchrun t.py"), Some("torchrun"));
        assert_eq!(
            of_words("python3.11 -u -m torch.distributed.run --nproc_per_node 2 t.py"),
            Some("torch.distributed.run")
        );
        assert_eq!(
            of_words("accelerate launch --cpu t.py"),
            Some("accelerate launch")
        );
        assert_eq!(of_words("accelerate config"), None);
        assert_eq!(of_words("python main.py -m torch.distributed.run"), None);
        assert_eq!(
            of_words("python -X dev -m torch.distributed.launch t.py"),
            Some("torch.distributed.launch")
        );
        assert_eq!(of_words("python main.py"), None);
        assert_eq!(of_words("sh -c torchrun"), None);
    }
}
