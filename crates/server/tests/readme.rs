//! The README's list of supported commands is the command table's, not a second list kept
//! by hand: this test fails (printing the block to paste) when they differ.

use std::collections::BTreeMap;

use latch_server::table::table;

const BEGIN: &str =
    "<!-- commands:begin (LATCH_UPDATE_README=1 cargo test -p latch-server --test readme) -->";
const END: &str = "<!-- commands:end -->";

fn render() -> String {
    let table = table();
    let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for command in table.top_level() {
        let mut name = command.spec.name.to_uppercase();
        let subcommands: Vec<String> = table
            .subcommands_of(command)
            .map(|s| s.spec.name.to_uppercase())
            .collect();
        if !subcommands.is_empty() {
            name = format!("{name} ({})", subcommands.join(", "));
        }
        groups
            .entry(command.spec.group.name())
            .or_default()
            .push(name);
    }
    let mut out = String::new();
    for (group, mut names) in groups {
        names.sort();
        out.push_str(&format!(
            "- **{group}** ({}): {}\n",
            names.len(),
            names.join(", ")
        ));
    }
    out
}

#[test]
fn readme_lists_exactly_the_commands_in_the_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let readme = std::fs::read_to_string(path).expect("README.md");
    let start = readme
        .find(BEGIN)
        .expect("README has the commands:begin marker")
        + BEGIN.len();
    let end = readme
        .find(END)
        .expect("README has the commands:end marker");
    let listed = readme[start..end].trim();
    let expected = render();
    if std::env::var_os("LATCH_UPDATE_README").is_some() {
        let updated = format!("{}\n{}{}", &readme[..start], expected, &readme[end..]);
        std::fs::write(path, updated).expect("write README.md");
        return;
    }
    assert!(
        listed == expected.trim(),
        "README's supported-command list differs from the command table; replace the block between the markers with:\n\n{expected}"
    );
}
