//! `docs/parameters.md`'s `/test` parameter table is the parameter table of the code
//! (`kvbench_core::measurement::parameter`): a parameter added, renamed or re-bounded in one place and not the
//! other fails here. Refresh the page's table with `UPDATE_GOLDEN=1 cargo test -p kvbench-core
//! --test docs_parameters`, then review the diff.

use std::path::Path;

const HEADER: &str = "| parameter | default | bounds | meaning |";

#[test]
fn the_docs_table_is_the_code_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/parameters.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let start = page
        .find(HEADER)
        .expect("docs/parameters.md has the parameter table");
    let len = page[start..]
        .find("\n\n")
        .map_or(page.len() - start, |n| n + 1);
    let table = &page[start..start + len];
    let wanted = kvbench_core::measurement::parameter::docs_table();
    if table != wanted && std::env::var_os("UPDATE_GOLDEN").is_some() {
        let updated = format!("{}{wanted}{}", &page[..start], &page[start + len..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        table == wanted,
        "docs/parameters.md's parameter table differs from kvbench_core::measurement::parameter (UPDATE_GOLDEN=1 rewrites it):\n--- docs ---\n{table}--- code ---\n{wanted}"
    );
}
