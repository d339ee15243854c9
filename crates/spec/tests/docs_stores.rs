//! `docs/stores.md` describes exactly the stores of `kvbench_spec::STORES`: its generated
//! tables are what [`kvbench_spec::docs_tables`] renders (`UPDATE_GOLDEN=1 cargo test -p
//! kvbench-spec --test docs_stores` rewrites them; review the diff), and every table on the page
//! whose first column is `store` has one row per store, none for a store that does not exist.

use std::path::{Path, PathBuf};

use kvbench_spec::{docs_tables, STORES};

const BEGIN: &str = "<!-- stores:begin (generated from crates/spec/src/store.rs: UPDATE_GOLDEN=1 cargo test -p kvbench-spec) -->\n";
const END: &str = "<!-- stores:end -->";

fn page_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/stores.md")
}

fn page() -> String {
    std::fs::read_to_string(page_path()).expect("docs/stores.md")
}

/// The first cell of every row of every table whose header's first cell is `store`, one list
/// per table, as `(line number, cell without its backticks)`.
fn store_columns(page: &str) -> Vec<Vec<(usize, String)>> {
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().trim_matches('`').to_string())
            .collect()
    };
    let mut tables = Vec::new();
    let mut lines = page.lines().enumerate().peekable();
    while let Some((_, line)) = lines.next() {
        if !line.trim_start().starts_with('|')
            || cells(line).first().map(String::as_str) != Some("store")
        {
            continue;
        }
        let mut rows = Vec::new();
        while let Some((n, row)) = lines.next_if(|(_, l)| l.trim_start().starts_with('|')) {
            let first = cells(row).into_iter().next().unwrap_or_default();
            if !first.chars().all(|c| c == '-' || c == ':') {
                rows.push((n + 1, first));
            }
        }
        tables.push(rows);
    }
    tables
}

#[test]
fn the_store_tables_are_generated_from_the_descriptions() {
    let page = page();
    let (Some(start), Some(end)) = (page.find(BEGIN), page.find(END)) else {
        panic!("docs/stores.md lacks the {BEGIN:?} … {END:?} markers");
    };
    let want = docs_tables();
    let have = &page[start + BEGIN.len()..end];
    if have != want {
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            let updated = format!("{}{want}{}", &page[..start + BEGIN.len()], &page[end..]);
            std::fs::write(page_path(), updated).expect("write docs/stores.md");
        } else {
            panic!("docs/stores.md's store tables differ from store.rs; rerun with UPDATE_GOLDEN=1\n{want}");
        }
    }
}

#[test]
fn every_store_has_a_row_and_every_row_is_a_store() {
    let page = page();
    let tables = store_columns(&page);
    assert!(
        tables.len() >= 2,
        "docs/stores.md: expected the two store tables, found {}",
        tables.len()
    );
    let ids: Vec<&str> = STORES.iter().map(|s| s.id.as_str()).collect();
    let mut problems = Vec::new();
    for rows in &tables {
        let at = rows.first().map_or(0, |(n, _)| *n);
        for id in &ids {
            let count = rows.iter().filter(|(_, cell)| cell == id).count();
            if count != 1 {
                problems.push(format!(
                    "the table at line {at}: store `{id}` has {count} rows"
                ));
            }
        }
        for (n, cell) in rows {
            if !ids.contains(&cell.as_str()) {
                problems.push(format!("line {n}: `{cell}` is no store of spec::STORES"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/stores.md:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_row_check_sees_a_missing_and_an_unknown_store() {
    let page = "| store | what |\n| --- | --- |\n| `kv` | KV |\n| `memcached` | no |\n\ntext\n";
    let tables = store_columns(page);
    assert_eq!(
        tables,
        [vec![(3, "kv".to_string()), (4, "memcached".to_string())]]
    );
}
