//! `docs/answer.md` documents every field of the golden files (`tests/golden/*.jsonl`, the shapes
//! on the wire), and documents no field they lack: a field added to a shape, or removed from it,
//! fails here until the page says so.
//!
//! Each golden file has its table on the page, under a heading of its own: the first cell of a row
//! names the fields it describes, in backticks, as dotted paths (`stores.<name>.read_ms`; a field
//! of one store only, `stores.do.location_hint`). The `/test` answer a kept line embeds is checked
//! against the answer's table.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

/// Golden file → the heading of its table in `docs/answer.md`.
const TABLES: [(&str, &str); 3] = [
    ("answer.jsonl", "## Fields of the `/test` answer"),
    ("kept.jsonl", "## Fields of a kept line"),
    ("control.jsonl", "## A stream's control lines"),
];

/// The fields named in the first column of the first table under `heading`.
fn documented(page: &str, heading: &str) -> BTreeSet<String> {
    let start = page
        .lines()
        .position(|l| l.trim_end() == heading)
        .unwrap_or_else(|| panic!("docs/answer.md has no heading {heading:?}"));
    let mut fields = BTreeSet::new();
    let mut in_table = false;
    for line in page.lines().skip(start + 1) {
        if line.starts_with("## ") {
            break;
        }
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        if !in_table {
            in_table = true; // the header row
            continue;
        }
        let first = line.trim_matches('|').split('|').next().unwrap_or("");
        // Inline code spans: every other piece between backticks.
        fields.extend(
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .filter(|f| !f.is_empty() && !f.chars().all(|c| c == '-'))
                .map(str::to_string),
        );
    }
    assert!(
        !fields.is_empty(),
        "docs/answer.md: no table under {heading:?}"
    );
    fields
}

/// Every field path of `value`, with the paths a line may be documented under: a store's own
/// object is `stores.<name>` and also `stores.<its id>`. Kept lines hand their `answer` to
/// `embedded`.
fn paths(
    value: &Value,
    prefix: &[String],
    out: &mut Vec<Vec<String>>,
    embedded: &mut Option<&mut Vec<Value>>,
) {
    let Value::Object(map) = value else { return };
    for (key, v) in map {
        let mut path = prefix.to_vec();
        path.push(key.clone());
        if prefix == ["stores"] {
            // A store's id is data, not a field (its fields are below it).
            paths(v, &path, out, embedded);
            continue;
        }
        out.push(path.clone());
        match (key.as_str(), prefix.is_empty(), embedded.as_deref_mut()) {
            ("answer", true, Some(answers)) => answers.push(v.clone()),
            _ => paths(v, &path, out, embedded),
        }
    }
}

/// `path` as the table may write it: literal, or with the store's id as `<name>`.
fn spellings(path: &[String]) -> [String; 2] {
    let literal = path.join(".");
    let mut general = path.to_vec();
    if general.len() > 2 && general[0] == "stores" {
        general[1] = "<name>".into();
    }
    [literal, general.join(".")]
}

/// What is wrong between the golden `lines` and the `documented` fields: a field of a line the
/// table lacks, or a field of the table no line has.
fn mismatches(
    file: &str,
    lines: &[Value],
    documented: &BTreeSet<String>,
    embedded: Option<&mut Vec<Value>>,
) -> Vec<String> {
    let mut embedded = embedded;
    let mut found = Vec::new();
    for line in lines {
        paths(line, &[], &mut found, &mut embedded);
    }
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for path in &found {
        let names = spellings(path);
        match names.iter().find(|n| documented.contains(*n)) {
            Some(n) => {
                used.insert(n.clone());
            }
            None => problems.push(format!("{file}: field `{}` is not documented", names[1])),
        }
    }
    for field in documented.difference(&used) {
        problems.push(format!(
            "{file}: `{field}` is documented but in no golden line"
        ));
    }
    problems.sort();
    problems.dedup();
    problems
}

fn golden(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{file}: {e}")))
        .collect()
}

#[test]
fn every_golden_field_is_in_docs_answer_md_and_no_other() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/answer.md"))
            .expect("docs/answer.md");
    let answer_fields = documented(&page, TABLES[0].1);
    let mut answers = golden("answer.jsonl");
    let mut embedded = Vec::new();
    let mut problems = Vec::new();
    for (file, heading) in &TABLES[1..] {
        let with = (*file == "kept.jsonl").then_some(&mut embedded);
        problems.extend(mismatches(
            file,
            &golden(file),
            &documented(&page, heading),
            with,
        ));
    }
    assert!(!embedded.is_empty(), "kept.jsonl embeds no answer");
    answers.extend(embedded);
    problems.extend(mismatches("answer.jsonl", &answers, &answer_fields, None));
    assert!(
        problems.is_empty(),
        "docs/answer.md:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_field_missing_from_the_table_or_the_lines_is_named() {
    let page = "## T\n\n| field | meaning |\n| --- | --- |\n| `key` | k |\n| `stores.<name>.read_ms`, `gone` | r |\n\nafter\n";
    let documented = documented(page, "## T");
    assert_eq!(
        documented,
        ["gone", "key", "stores.<name>.read_ms"]
            .map(String::from)
            .into()
    );
    let line = serde_json::json!({"key": "1", "stores": {"kv": {"read_ms": 1.0, "hit": true}}});
    assert_eq!(
        mismatches("t.jsonl", &[line], &documented, None),
        [
            "t.jsonl: `gone` is documented but in no golden line",
            "t.jsonl: field `stores.<name>.hit` is not documented",
            "t.jsonl: field `stores` is not documented",
        ]
    );
}
