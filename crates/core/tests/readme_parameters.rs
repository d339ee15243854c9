//! The README's `/test` parameter table is the parameter table of the code
//! (`kvbench_core::parameter`): a parameter added, renamed or re-bounded in one place and not the
//! other fails here. Refresh the README's table with `UPDATE_README=1 cargo test -p kvbench-core
//! --test readme_parameters`, then review the diff.

use std::path::Path;

const HEADER: &str = "| parameter | default | bounds | meaning |";

#[test]
fn the_readme_table_is_the_code_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme
        .find(HEADER)
        .expect("README.md has the parameter table");
    let len = readme[start..]
        .find("\n\n")
        .map_or(readme.len() - start, |n| n + 1);
    let table = &readme[start..start + len];
    let wanted = kvbench_core::parameter::readme_table();
    if std::env::var_os("UPDATE_README").is_some() {
        let updated = format!("{}{wanted}{}", &readme[..start], &readme[start + len..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        table == wanted,
        "README.md's parameter table differs from kvbench_core::parameter (UPDATE_README=1 rewrites it):\n--- README ---\n{table}--- code ---\n{wanted}"
    );
}
