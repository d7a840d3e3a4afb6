//! Cursor paging of `tools/list`, `resources/list`,
//! `resources/templates/list` and `prompts/list` at `/mcp`: at most
//! `server.mcpPageSize` items a page, in the list's own deterministic order,
//! with an opaque `nextCursor` while more remain. A cursor names the offset
//! of the next item in that list (`<kind>:<offset>`, base64), so a cursor of
//! one list is refused by another; a list that changes while a client pages
//! may shift by the change, and the client is sent `list_changed` for it.
//! Pure.

use rmcp::ErrorData;

/// Which list a cursor belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Tools,
    Resources,
    Templates,
    Prompts,
}

impl List {
    fn tag(self) -> &'static str {
        match self {
            List::Tools => "tools",
            List::Resources => "resources",
            List::Templates => "templates",
            List::Prompts => "prompts",
        }
    }

    fn method(self) -> &'static str {
        match self {
            List::Tools => "tools/list",
            List::Resources => "resources/list",
            List::Templates => "resources/templates/list",
            List::Prompts => "prompts/list",
        }
    }
}

/// One page of `items` from `cursor` (none: the first page), at most
/// `size` long, and the cursor of the next page when there is one.
pub fn page<T>(
    list: List,
    items: Vec<T>,
    cursor: Option<&str>,
    size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = match cursor {
        None => 0,
        Some(c) => offset(list, c)?,
    };
    let size = size.max(1);
    let total = items.len();
    let end = start.saturating_add(size).min(total);
    let next = (end < total).then(|| encode(list, end));
    let page = items
        .into_iter()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect();
    Ok((page, next))
}

fn encode(list: List, offset: usize) -> String {
    crate::b64::encode(format!("{}:{offset}", list.tag()).as_bytes())
}

fn offset(list: List, cursor: &str) -> Result<usize, ErrorData> {
    let decoded = crate::b64::decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok());
    decoded
        .as_deref()
        .and_then(|s| s.strip_prefix(list.tag()))
        .and_then(|s| s.strip_prefix(':'))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "cursor {cursor:?} is not one this hub gave for {}; pass the nextCursor of the previous page unchanged, or call {} without a cursor to start over",
                    list.method(),
                    list.method()
                ),
                None,
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(list: List, items: Vec<u32>, size: usize) -> Vec<Vec<u32>> {
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let (p, next) = page(list, items.clone(), cursor.as_deref(), size).expect("page");
            pages.push(p);
            match next {
                Some(n) => cursor = Some(n),
                None => return pages,
            }
        }
    }

    #[test]
    fn pages_cover_the_list_once_in_order() {
        let items: Vec<u32> = (0..7).collect();
        assert_eq!(
            all(List::Tools, items.clone(), 3),
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]
        );
        assert_eq!(all(List::Tools, items.clone(), 7), vec![items.clone()]);
        assert_eq!(all(List::Tools, items, 100).len(), 1);
        assert_eq!(all(List::Prompts, Vec::new(), 3), vec![Vec::<u32>::new()]);
    }

    #[test]
    fn a_foreign_or_garbled_cursor_is_invalid_params_saying_what_to_do() {
        let (_, next) = page(List::Tools, vec![1, 2, 3], None, 1).expect("page");
        let next = next.expect("a next page");
        let e = page(List::Prompts, vec![1, 2, 3], Some(&next), 1).unwrap_err();
        assert!(e.message.contains("prompts/list without a cursor"), "{e:?}");
        assert!(page(List::Tools, vec![1], Some("%%%"), 1).is_err());
        // A cursor past a list that shrank is an empty last page.
        let (p, n) = page(List::Tools, vec![1], Some(&next), 1).expect("page");
        assert!(p.is_empty() && n.is_none());
    }
}
