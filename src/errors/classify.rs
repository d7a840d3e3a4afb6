//! The classifier: the ordered rule table that maps error text to an
//! [`ErrorType`], and the concrete suggestion for each class.

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

use super::kind::ErrorType;

/// How much of a message `classify` reads. The cues sit in the first lines
/// (Playwright's call log included); a tool that dumps megabytes of output
/// with `isError` must not make classification slow.
pub(super) const SCAN_LIMIT: usize = 32 * 1024;

/// The ordered rule table: the first rule that matches wins, so specific rules
/// come before generic ones. Every pattern is compiled case-insensitively.
///
/// Decisions worth knowing (each has a test):
/// - Browser, page and element cues come first: Playwright wraps its own
///   failures in generic words ("Timeout 30000ms exceeded", "doesn't exist"),
///   and the browser-level cue is the one that says what to do.
/// - A Playwright timeout whose call log waits for a locator/selector is
///   ELEMENT_NOT_FOUND; a timeout while navigating stays TIMEOUT.
/// - "strict mode violation" (a selector that matches several elements) is
///   ELEMENT_NOT_FOUND: the selector did not identify one element, and the
///   fix is the same as for a missing one (a ref from a fresh snapshot).
/// - "Tool x not found" beats -32602 (the TS SDK reports unknown tools as
///   InvalidParams) and validation cues beat TIMEOUT/NOT_FOUND (a schema error
///   about a `timeout` field is still a schema error).
/// - rmcp's transport errors ("Transport closed", "Transport send error: …
///   Connection refused") are SERVER_UNAVAILABLE before the network rule sees
///   "refused"; a Rust/Python "Broken pipe" is the hub's pipe to a child, so
///   SERVER_UNAVAILABLE; Node's "write EPIPE" comes from a tool's socket, so
///   NETWORK.
/// - Network beats NOT_FOUND ("getaddrinfo ENOTFOUND"); ETIMEDOUT is TIMEOUT.
/// - HTTP 403/"Forbidden" is PERMISSION (authenticated but not allowed);
///   401/"Unauthorized"/bad tokens are UNAUTHORIZED.
/// - "bash: foo: command not found" and "spawn npx ENOENT" are NOT_FOUND.
/// - Bare status codes (401, 403, 404, 502, 503) only count with an HTTP-ish
///   word before them and only after every textual rule, so "/tmp/401.json"
///   is not an auth failure.
#[rustfmt::skip]
const RULES: &[(ErrorType, &str)] = &[
    (ErrorType::BrowserMissing, r"executable doesn'?t exist|looks like playwright\b[\s\S]{0,200}\binstall|npx playwright install|distribution '[^']*' is not found|\bbrowser\b.{0,60}\bis not installed|host system is missing dependencies|could not find (?:chrome|chromium|firefox|expected browser)\b|spawn \S*(?:chrom|firefox|webkit|msedge)\S* enoent"),
    (ErrorType::PageClosed, r"target page, context or browser has been closed|\btarget (?:page )?(?:closed|crashed)\b|\b(?:page|context|browser|frame|tab|window) (?:has been|was|is|got) (?:closed|crashed|detached)\b|\bsession closed\b|\bbrowser (?:has )?disconnected\b|\bno open pages\b|execution context was destroyed|\bno such window\b|target window already closed|\bpage crashed\b"),
    (ErrorType::ElementNotFound, r"waiting for (?:locator|selector|get_?by|element|frame_?locator|\$)|no node found for selector|\belements?(?:\(s\))? (?:was |were )?not found\b|\bno (?:such )?elements?\b|unable to (?:find|locate) (?:an? )?element|(?:could not|failed to|cannot) (?:find|locate) element|\bref \S+ not found|not found in the current page snapshot|strict mode violation|element is (?:not (?:visible|attached|enabled|editable|stable)|outside of the viewport|detached)|not attached to the dom|waiting for selector .{0,200}failed|does not match any elements|\bno current snapshot\b|\bstale element\b"),
    (ErrorType::AssertionFailed, r"\bassertion ?(?:failed|error)\b|\bexpectation (?:failed|not met)\b|\bexpect\([^)]{0,120}\)\.(?:not\.)?to\w+"),
    (ErrorType::TemplateError, r#"\btemplate (?:error|render(?:ing)? (?:error|failed))|error rendering "|not found in strict mode|\bunclosed (?:tag|block|expression)\b"#),
    (ErrorType::AmbiguousTool, r"\bambiguous tool\b|\bis ambiguous\b"),
    (ErrorType::SafetyBlocked, r"\bblocked by (?:a |the )?safety\b|\bsafety rule\b|\bdenied by (?:a |the )?(?:safety )?rule\b"),
    (ErrorType::ToolNotFound, r#"\bunknown tool\b|\btool\s+['"`]?[\w.:/-]+['"`]?\s+(?:was\s+)?not\s+found|\btool not found\b|\bno such tool\b|-32601\b|\bmethod not found\b"#),
    (ErrorType::InvalidParams, r"input validation error|\binvalid (?:arguments?|params|parameters?|input|url)\b|-32602\b|required propert(?:y|ies)|must have required|\bmust be (?:a |an )?(?:string|number|integer|boolean|object|array|null|equal to one of)\b|validation errors? for\b|\bfield required\b|missing required (?:argument|parameter|field|property)|\bexpected \w+, received \w+|\binvalid_type\b|\bis not of type\b|additional propert(?:y|ies)|unexpected keyword argument|missing \d+ required positional argument"),
    (ErrorType::ServerUnavailable, r"\btransport (?:closed|send error|error)\b|\bconnection closed\b|\bbroken pipe\b|\bserver (?:is )?(?:unavailable|not running|not connected|restarting|stopped|down)\b|\bserver\b.{0,60}\b(?:is (?:restarting|not running|down|stopped)|has (?:exited|crashed|stopped))\b|\b(?:child )?process (?:has )?exited\b|\bnot connected\b"),
    (ErrorType::Network, r"\benotfound\b|\beai_again\b|\beconnrefused\b|\beconnreset\b|\beconnaborted\b|\behostunreach\b|\benetunreach\b|\benetdown\b|\bepipe\b|socket hang up|network is unreachable|no route to host|connection (?:refused|reset|aborted)|\bconnection(?:refused|reset|aborted)?error\b|\bnet::err_\w+|name or service not known|temporary failure in name resolution|nodename nor servname|could not resolve host|failed to resolve|\bno such host\b|\bfetch failed\b|failed to establish a new connection|newconnectionerror|\bconnecterror\b|\bnetwork ?error\b|\bhost is down\b|\bbad gateway\b|\bservice unavailable\b|error sending request|\bfailed to connect to\b|couldn'?t connect to (?:server|host)"),
    (ErrorType::Unauthorized, r"\bunauthori[sz]ed\b|\bunauthenticated\b|\bnot authenticated\b|\bauthentication (?:failed|required|error)|\binvalid (?:api[ _-]?key|access token|token|credentials|bearer)\b|\b(?:api[ _-]?key|token|credentials) (?:is |are |has )?(?:invalid|expired|missing|revoked|been revoked)\b|\bbad credentials\b|\bmissing (?:api[ _-]?key|token|credentials|authorization)\b|\bincorrect api key\b"),
    (ErrorType::Permission, r"outside (?:of )?(?:the )?allowed director|\baccess (?:is )?denied\b|permission denied|\beacces\b|\beperm\b|operation not permitted|permissionerror|read-only file system|\berofs\b|\bnot permitted\b|insufficient permissions?|\bforbidden\b"),
    (ErrorType::Timeout, r"timeout|\btime[ds]?[ _-]out\b|timedout|deadline exceeded"),
    (ErrorType::Cancelled, r"\bcancell?(?:ed|ing|ation)\b|\babort(?:ed|error)\b|operation was aborted|keyboardinterrupt|cancellederror|\binterrupted\b"),
    (ErrorType::RateLimited, r"too many requests|\brate[ -]?limit(?:ed|ing)?\b|\bthrottl(?:ed|ing)\b|\bretry[ -]after\b|\b(?:http|status|code|error|response|returned)\b[^\n\d]{0,16}\b429\b"),
    (ErrorType::LimitExceeded, r"payload too large|request entity too large|\bexceeds? (?:the )?(?:maximum|max|limit|allowed)\b|\btoo (?:large|big|long)\b|too many (?:steps|tasks|connections|calls|open files)|\b(?:size|quota|length|memory) limit|\blimit (?:exceeded|reached)\b|quota exceeded|maxbuffer|no space left on device|\benospc\b|\bemfile\b|\befbig\b|out of memory"),
    (ErrorType::UpstreamError, r"-32603\b|\binternal (?:server )?error\b"),
    (ErrorType::InvalidMessage, r"\binvalid (?:message|frame|json-rpc)\b|\bmalformed (?:message|frame|json)\b|\bunknown message type\b"),
    (ErrorType::NotFound, r"\benoent\b|no such file|\bdoes ?n[o']t exist\b|\bnot found\b|filenotfounderror|modulenotfounderror|no module named|cannot find (?:module|package|the path|the file|path|file)\b|could not find (?:file|path|module|directory|a part of the path)\b|\benotdir\b|\bnot a directory\b|\bunable to find\b|\bno such (?:directory|command|table|key|process|user)\b"),
    // Bare status codes: last, and only after an HTTP-ish word.
    (ErrorType::Unauthorized, r"\b(?:http|status|code|error|response|returned)\b[^\n\d]{0,16}\b401\b"),
    (ErrorType::Permission, r"\b(?:http|status|code|error|response|returned)\b[^\n\d]{0,16}\b403\b"),
    (ErrorType::NotFound, r"\b(?:http|status|code|error|response|returned)\b[^\n\d]{0,16}\b404\b"),
    (ErrorType::Network, r"\b(?:http|status|code|error|response|returned)\b[^\n\d]{0,16}\b50[23]\b"),
];

/// All rules in one automaton: one pass over the text, and the lowest
/// matching index is the first rule in table order. `None` only if a pattern
/// fails to compile, which a unit test rules out.
static CLASSIFIER: LazyLock<Option<RegexSet>> = LazyLock::new(|| {
    RegexSetBuilder::new(
        RULES
            .iter()
            .map(|(_, pattern)| ascii_word_boundaries(pattern)),
    )
    .case_insensitive(true)
    .build()
    .ok()
});

/// Classify an error message (a tool's error text, an rmcp error, a shell's
/// stderr) into an [`ErrorType`]; `Unknown` when no rule matches.
pub fn classify(text: &str) -> ErrorType {
    let Some(set) = CLASSIFIER.as_ref() else {
        return ErrorType::Unknown;
    };
    set.matches(scan_window(text))
        .iter()
        .next()
        .and_then(|index| RULES.get(index))
        .map_or(ErrorType::Unknown, |(t, _)| *t)
}

/// `\b` as an ASCII word boundary. A Unicode `\b` makes the regex engine give
/// up its fast DFA on any non-ASCII byte (Playwright frames its messages in
/// box-drawing characters), which cost ~200 ms on a 32 KiB message; every cue
/// here is ASCII, so the ASCII boundary means the same thing.
fn ascii_word_boundaries(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)")
}

/// The first `SCAN_LIMIT` bytes, cut on a char boundary.
fn scan_window(text: &str) -> &str {
    let mut end = text.len().min(SCAN_LIMIT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The regexes that pull details (a path, a host, a ref) out of a message for
/// the suggestion. `Option` because a static cannot fail loudly without a
/// panic; a unit test checks that each compiles.
macro_rules! extractors {
    ($($name:ident = $pattern:expr;)+) => {
        $(static $name: LazyLock<Option<Regex>> = LazyLock::new(|| {
            RegexBuilder::new(&ascii_word_boundaries($pattern)).case_insensitive(true).build().ok()
        });)+
        #[cfg(test)]
        static EXTRACTORS: &[&LazyLock<Option<Regex>>] = &[$(&$name),+];
    };
}

extractors! {
    PATH = r#"'((?:[a-z]:)?[^'\n]*[/\\][^'\n]*|[^'\n/\\ ]+\.[a-z0-9]{1,8})'|"((?:[a-z]:)?[^"\n]*[/\\][^"\n]*)"|(?:^|[\s=(])((?:[a-z]:\\|~?/)[^\s'",):<>]+)"#;
    COMMAND = r"([\w.+-]+): (?:command )?not found|spawn (\S+) enoent";
    MODULE = r#"cannot find module '([^']+)'|no module named '?([\w.]+)"#;
    PARENT_DIR = r"parent directory does not exist: (\S+)";
    ALLOWED_DIRS = r"outside allowed directories: .*? not in ([^\n]+)";
    BROWSER_NAME = r#"ms-playwright/(chromium|firefox|webkit)|distribution '([^']+)'|browser "?(chromium|chrome|firefox|webkit|msedge)"#;
    REF = r"\bref (\S+) not found";
    LOCATOR = r"(?m)waiting for ((?:locator|get_?by|frame_?locator|selector)[^\n]{0,120}?)(?:\s+to be \w+)?\s*$";
    HOST = r"(?:enotfound|eai_again) (\S+)|could not resolve host:? (\S+)|failed to resolve '([^']+)'|lookup (\S+?):|err_name_not_resolved at (\S+)";
    ADDRESS = r"(?:econnrefused|econnreset|ehostunreach|enetunreach) (\S+)|failed to connect to (\S+ port \d+)|err_connection_refused at (\S+)";
    TIMEOUT_MS = r"(\d+ ?ms)\b|\b(timeout=\d+(?:\.\d+)?)";
    TOOL_NAME = r#"unknown tool:? ['"`]?([\w.:/-]+)|tool ['"`]?([\w.:/-]+)['"`]? (?:was )?not found"#;
    FIELD = r#""path":\s*\[\s*"([^"]+)"|required property '([^']+)'|'([^']+)' is a required property|missing required (?:argument|parameter|field|property):? ['"`]?(\w+)"#;
}

/// The first participating capture group of `re` in `text`, trimmed of the
/// punctuation messages put around paths and names, and clipped so a
/// suggestion never echoes a whole dump.
fn capture(re: &LazyLock<Option<Regex>>, text: &str) -> Option<String> {
    let caps = re.as_ref()?.captures(scan_window(text))?;
    let found = caps.iter().skip(1).flatten().next()?.as_str();
    let trimmed = found.trim().trim_end_matches(['.', ',', ';']);
    if trimmed.is_empty() {
        return None;
    }
    Some(trimmed.chars().take(200).collect())
}

fn contains(message: &str, needle: &str) -> bool {
    scan_window(message).to_lowercase().contains(needle)
}

/// The folder to list for a missing path (`.` for a bare file name).
fn parent_of(path: &str) -> &str {
    match path.trim_end_matches('/').rsplit_once(['/', '\\']) {
        Some(("", _)) => "/",
        Some((parent, _)) => parent,
        None => ".",
    }
}

/// A concrete suggestion for a class, using the message where it helps.
/// Never empty.
pub fn suggestion_for(t: ErrorType, message: &str) -> String {
    match t {
        ErrorType::NotFound => not_found(message),
        ErrorType::Permission => permission(message),
        ErrorType::BrowserMissing => browser_missing(message),
        ErrorType::PageClosed => page_closed(message),
        ErrorType::ElementNotFound => element_not_found(message),
        ErrorType::Network => network(message),
        ErrorType::Timeout => {
            let limit = capture(&TIMEOUT_MS, message)
                .map(|n| format!(" (limit: {n})"))
                .unwrap_or_default();
            format!("the call took too long{limit}: raise `timeout` on the call (milliseconds) or taskEngine.defaultTimeout in config.json, and check that the target responds (health_check)")
        }
        ErrorType::ToolNotFound => match capture(&TOOL_NAME, message) {
            Some(name) => format!("no tool is named `{name}`: call list_tools for the available names, or use the qualified form server__tool"),
            None => "the tool does not exist: call list_tools for the available names, or use the qualified form server__tool".to_string(),
        },
        ErrorType::AmbiguousTool => "several servers offer this tool name: call it by its qualified name (server__tool); list_tools shows each qualifiedName".to_string(),
        ErrorType::InvalidParams => invalid_params(message),
        ErrorType::ServerUnavailable => "the MCP server is not connected (it exited or is restarting): retry shortly; health_check shows its state, restarts and lastError (its stderr)".to_string(),
        ErrorType::TemplateError => "a {{…}} reference could not be rendered: it must name a variable saved by an earlier step's saveAs, or vars.<name> from options.variables; check the spelling and that the step ran".to_string(),
        ErrorType::SafetyBlocked => "a safety rule blocked this call: change the call, approve it when asked (confirm), or have the operator adjust the safety rules in config.json".to_string(),
        ErrorType::Cancelled => "the call was cancelled (cancel_task, a client disconnect, or the server aborted it): run it again, or continue the task with resume_task".to_string(),
        ErrorType::InvalidMessage => r#"send one JSON object per WebSocket frame with a known `type` and the fields docs/protocol.md lists for it, e.g. {"type":"list_tools"}"#.to_string(),
        ErrorType::Unauthorized => "the credentials were rejected: check the token you connect to the hub with, or the API key the server reads from its env in config.json, and that it has not expired".to_string(),
        ErrorType::LimitExceeded => limit_exceeded(message),
        ErrorType::RateLimited => rate_limited(message),
        ErrorType::UpstreamError => "the server failed internally while handling the call: the hub retries it once by itself; if it fails again, read the server's stderr (health_check stderrTail) and report it to the server's maintainers".to_string(),
        ErrorType::AssertionFailed => "the step's result did not match its `expect`: compare expected and actual in the message, then fix the step or the expectation".to_string(),
        ErrorType::Unknown => "the error matched no known class: read the message; health_check shows the server's state and lastError (its stderr); retry only if the call is safe to repeat".to_string(),
    }
}

fn not_found(message: &str) -> String {
    if let Some(dir) = capture(&PARENT_DIR, message) {
        return format!(
            "the folder {dir} does not exist: create it first (create_directory), then retry"
        );
    }
    if let Some(module) = capture(&MODULE, message) {
        return format!("the package `{module}` is missing: install it (npm install / pip install) where the server runs");
    }
    if let Some(command) = capture(&COMMAND, message) {
        return format!("the command `{command}` is not installed or not on PATH: install it, or give its full path (e.g. the server's `command` in config.json)");
    }
    if let Some(path) = capture(&PATH, message) {
        return format!(
            "check that {path} exists (paths are case-sensitive); list its folder with list_directory {}",
            parent_of(&path)
        );
    }
    "the named resource does not exist: check the name or path for typos, and list what exists first (list_directory, list_tools)".to_string()
}

fn permission(message: &str) -> String {
    if contains(message, "outside allowed director") {
        let dirs = capture(&ALLOWED_DIRS, message)
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        return format!("use a path inside the server's allowed directories{dirs} (list_allowed_directories shows them); or add the folder to the server's args in config.json");
    }
    if contains(message, "read-only file system") || contains(message, "erofs") {
        return "the target is on a read-only file system: write somewhere writable, e.g. inside the workspace".to_string();
    }
    if ["forbidden", "status code 403", "http 403"]
        .iter()
        .any(|cue| contains(message, cue))
    {
        return "the remote service refused access (403): use credentials that are allowed to reach this resource".to_string();
    }
    match capture(&PATH, message) {
        Some(path) => format!("the hub's user may not access {path}: use a path it owns, or change the file's permissions (chmod/chown)"),
        None => "the operation is not permitted for the hub's user: use a path or resource it owns, or change the permissions".to_string(),
    }
}

fn browser_missing(message: &str) -> String {
    if contains(message, "missing dependencies") {
        return "install the browser's system libraries: `npx playwright install-deps chromium` (as root), or install Debian's chromium (`apt-get install chromium`) and start @playwright/mcp with `--executable-path /usr/bin/chromium`".to_string();
    }
    let browser = capture(&BROWSER_NAME, message).unwrap_or_else(|| "chromium".to_string());
    format!("install the browser: `npx playwright install {browser}`, or install Debian's chromium (`apt-get install chromium`) and start @playwright/mcp with `--executable-path /usr/bin/chromium`")
}

fn page_closed(message: &str) -> String {
    if contains(message, "no open pages") {
        return "no page is open yet: call browser_navigate with a URL first".to_string();
    }
    if contains(message, "execution context was destroyed") {
        return "the page navigated while the call ran: wait for it to settle (browser_wait_for) and take a new browser_snapshot".to_string();
    }
    "the page, context or browser was closed (browser_close, a crash, or a navigation): open a page again with browser_navigate and take a fresh browser_snapshot before retrying".to_string()
}

fn element_not_found(message: &str) -> String {
    if let Some(r) = capture(&REF, message) {
        return format!("ref {r} is stale or from another snapshot: take a new browser_snapshot and use a ref from it");
    }
    if contains(message, "strict mode violation") {
        return "the selector matches several elements: make it unique (by role and name, text, or nth) or use a ref from browser_snapshot".to_string();
    }
    if contains(message, "no current snapshot") {
        return "take a browser_snapshot first and use a ref from it".to_string();
    }
    if contains(message, "element is not") || contains(message, "outside of the viewport") {
        return "the element exists but is hidden, disabled or moving: wait for it (browser_wait_for), scroll it into view, or close what covers it".to_string();
    }
    match capture(&LOCATOR, message) {
        Some(locator) => format!("nothing matched {locator} in time: check the selector against a fresh browser_snapshot, wait for the page to finish loading, or raise `timeout`"),
        None => "the element was not found: take a fresh browser_snapshot and use a ref or selector from it; the page may still be loading".to_string(),
    }
}

fn network(message: &str) -> String {
    if let Some(host) = capture(&HOST, message) {
        return format!(
            "the host name in {host} does not resolve: check its spelling and the machine's DNS"
        );
    }
    if let Some(address) = capture(&ADDRESS, message) {
        return format!("the connection to {address} failed: check that the service is running there and the host and port are right");
    }
    "a network connection failed (refused, reset or unreachable): check the URL and that the remote service is up; NETWORK errors are retried automatically".to_string()
}

fn invalid_params(message: &str) -> String {
    if contains(message, "invalid url") {
        return "pass a full URL including the scheme, e.g. https://example.com/".to_string();
    }
    let field = capture(&FIELD, message)
        .map(|f| format!(" (check `{f}`)"))
        .unwrap_or_default();
    format!("the params do not match the tool's inputSchema{field}: compare them with the inputSchema from list_tools (required fields, types, allowed values)")
}

fn rate_limited(message: &str) -> String {
    let wait = retry_after(message)
        .map(|d| format!(" (it asked for {} s)", d.as_secs()))
        .unwrap_or_default();
    format!("the remote service is rate limiting: the hub waits{wait} and retries by itself (retry.strategies.RATE_LIMITED); lower the call rate if it keeps happening")
}

/// A `Retry-After` the message carries: `retry-after: 30`, `retry after 30
/// seconds`, `retry in 2s`. Capped at 10 minutes.
pub fn retry_after(message: &str) -> Option<std::time::Duration> {
    let lower = message.to_ascii_lowercase();
    let at = lower
        .find("retry-after")
        .or_else(|| lower.find("retry after"))
        .or_else(|| lower.find("retry in"))?;
    let digits: String = lower[at..]
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let secs: u64 = digits.parse().ok()?;
    let unit_ms = lower[at..].contains("ms") && !lower[at..].contains("seconds");
    let d = if unit_ms {
        std::time::Duration::from_millis(secs)
    } else {
        std::time::Duration::from_secs(secs)
    };
    Some(d.min(std::time::Duration::from_secs(600)))
}

/// Whether a transport's send error says the connection was never made
/// (refused, no such host): the request cannot have reached the server.
pub fn never_connected(message: &str) -> bool {
    const CUES: [&str; 7] = [
        "connection refused",
        "econnrefused",
        "dns error",
        "failed to lookup address",
        "name or service not known",
        "no such host",
        "could not resolve host",
    ];
    let lower = message.to_ascii_lowercase();
    CUES.iter().any(|c| lower.contains(c))
}

fn limit_exceeded(message: &str) -> String {
    if contains(message, "no space left") || contains(message, "enospc") {
        return "the disk is full: free space, then retry".to_string();
    }
    if contains(message, "emfile") || contains(message, "too many open files") {
        return "too many open files: raise the open-file limit (ulimit -n) or close unused handles".to_string();
    }
    "the request or its result exceeds a limit: send less (smaller batches, read files in parts with head/tail) or raise the limit in config.json".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_the_common_spellings() {
        use std::time::Duration;
        assert_eq!(
            retry_after("429 Too Many Requests; Retry-After: 7"),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after("Rate limit exceeded. Please retry after 60 seconds."),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            retry_after("slow down, retry in 250ms"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after("retry-after: 99999"),
            Some(Duration::from_secs(600))
        );
        assert_eq!(retry_after("429 Too Many Requests"), None);
    }

    #[test]
    fn every_rule_and_extractor_compiles() {
        assert!(CLASSIFIER.is_some(), "the rule table must compile");
        assert!(EXTRACTORS.iter().all(|re| re.is_some()));
    }
}
