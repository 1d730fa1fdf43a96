use super::*;

/// What `scan_with` hands over (line number, op code, step) and returns
/// (the end of the whole lines, or the error's text); `fail_at`: the line
/// number at which `each` returns an error.
type Seen = (Result<usize, String>, Vec<(usize, String, Option<String>)>);

fn scanned(bytes: &[u8], at_eof: bool, ahead: bool, fail_at: Option<usize>) -> Seen {
    let mut seen = Vec::new();
    let mut each = |line: usize, f: &Fields| {
        if Some(line) == fail_at {
            anyhow::bail!("refused line {line}");
        }
        let op = f.get("op_code").map_or("-", RawValue::get).to_owned();
        seen.push((line, op, f.get("step").map(|s| s.get().to_owned())));
        Ok(())
    };
    let out = scan_with(bytes, Path::new("j.log"), 10, at_eof, &mut each, ahead);
    (out.map_err(|e| format!("{e:#}")), seen)
}

fn journal(steps: usize) -> Vec<String> {
    let mut lines =
        vec![r#"{"op_code":0,"worker_id":"w","study_name":"s","directions":[1]}"#.to_owned()];
    lines.extend((0..steps).map(|n| {
        format!(
            r#"{{"op_code":7,"worker_id":"w","trial_id":0,"step":{n},"intermediate_value":{n}.5}}"#
        )
    }));
    lines
}

fn bytes(lines: &[String], tail: &str) -> Vec<u8> {
    let mut b = lines.join("\n").into_bytes();
    b.push(b'\n');
    b.extend_from_slice(tail.as_bytes());
    b
}

/// Read on a thread of its own, a journal hands over the same records in
/// the same order, and ends the same way, as read in place: a torn tail,
/// Python's NaN, a bad line on either side of a hand-over, an error from
/// the replay, and a file that does not end there (no line is torn).
#[test]
fn reading_ahead_changes_nothing_the_replay_sees() {
    let lines = journal(3 * BATCH);
    let both = |b: &[u8], at_eof: bool, fail_at: Option<usize>| {
        let here = scanned(b, at_eof, false, fail_at);
        assert_eq!(here, scanned(b, at_eof, true, fail_at));
        here
    };
    for tail in [
        "",
        "{\"op_code\":7,\"wor",
        "{\"op_code\":7,\"worker_id\":\n",
    ] {
        let b = bytes(&lines, tail);
        let (end, seen) = both(&b, true, None);
        assert_eq!(end, Ok(b.len() - tail.len()), "tail {tail:?}");
        assert_eq!(seen.len(), lines.len());
        assert_eq!(seen[5], (16, "7".to_owned(), Some("4".to_owned())));
        // Not at the file's end, a line that is not JSON is not torn.
        if tail.ends_with('\n') {
            assert!(both(&b, false, None)
                .0
                .unwrap_err()
                .contains("not a JSON record"));
        }
    }
    let mut nan = lines.clone();
    nan[BATCH] = nan[BATCH].replace(".5}", ".5,\"value\":NaN}");
    assert_eq!(both(&bytes(&nan, ""), true, None).1.len(), lines.len());
    for at in [BATCH - 1, BATCH, BATCH + 1, 2 * BATCH] {
        let mut bad = lines.clone();
        bad[at] = "{not json".into();
        let (e, seen) = both(&bytes(&bad, ""), true, None);
        let e = e.unwrap_err();
        assert!(
            e.contains(&format!("j.log:{}: not a JSON record", at + 11)),
            "{e}"
        );
        assert_eq!(seen.len(), at);
        bad[at] = "[1, 2]".into();
        let e = both(&bytes(&bad, ""), true, None).0.unwrap_err();
        assert!(e.contains(&format!(
            "j.log:{}: a journal record is a JSON object",
            at + 11
        )));
        let (e, seen) = both(&bytes(&lines, ""), true, Some(at + 11));
        assert_eq!(e, Err(format!("refused line {}", at + 11)));
        assert_eq!(seen.len(), at);
    }
}
