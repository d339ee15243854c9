//! A command's name as logs and error messages show it: upper case, printable ASCII only, bounded
//! — a name a client sent can neither forge a log line nor run on.

/// Longest command name quoted in logs and error messages.
const MAX_NAME_CHARS: usize = 40;

/// Printable, bounded rendering of a command (or subcommand) name.
pub fn display_name(name: &[u8]) -> String {
    let mut out = String::new();
    for (i, &b) in name.iter().enumerate() {
        if i == MAX_NAME_CHARS {
            out.push('…');
            break;
        }
        let upper = b.to_ascii_uppercase();
        if upper.is_ascii_graphic() {
            out.push(char::from(upper));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}
