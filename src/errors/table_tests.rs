//! Real-world error messages, as the tools print them, and the class each
//! must get. Declared in `errors/mod.rs` as `table_tests`.

use super::classify::{classify, suggestion_for, SCAN_LIMIT};
use super::kind::ErrorType;
use super::wire::HubError;

const CASES: &[(&str, ErrorType)] = &[
    // Node fs / child_process
    ("ENOENT: no such file or directory, open '/tmp/x.json'", ErrorType::NotFound),
    ("Error: ENOENT: no such file or directory, stat '/work/ws/missing'", ErrorType::NotFound),
    ("EACCES: permission denied, open '/root/secret.txt'", ErrorType::Permission),
    ("EPERM: operation not permitted, unlink '/sys/kernel'", ErrorType::Permission),
    ("Error: spawn npx ENOENT", ErrorType::NotFound),
    ("Error: Cannot find module '@modelcontextprotocol/server-filesystem'", ErrorType::NotFound),
    ("EROFS: read-only file system, open '/usr/lib/x'", ErrorType::Permission),
    ("ENOSPC: no space left on device, write", ErrorType::LimitExceeded),
    ("RangeError [ERR_CHILD_PROCESS_STDIO_MAXBUFFER]: stdout maxBuffer length exceeded", ErrorType::LimitExceeded),
    // Node network
    ("getaddrinfo ENOTFOUND api.example.invalid", ErrorType::Network),
    ("connect ECONNREFUSED 127.0.0.1:5432", ErrorType::Network),
    ("read ECONNRESET", ErrorType::Network),
    ("write EPIPE", ErrorType::Network),
    ("Error: socket hang up", ErrorType::Network),
    ("connect EHOSTUNREACH 10.1.2.3:443", ErrorType::Network),
    ("TypeError: fetch failed", ErrorType::Network),
    ("connect ETIMEDOUT 203.0.113.5:443", ErrorType::Timeout),
    ("AbortError: This operation was aborted", ErrorType::Cancelled),
    ("TimeoutError: The operation was aborted due to timeout", ErrorType::Timeout),
    ("Request failed with status code 401", ErrorType::Unauthorized),
    ("HTTP 403 Forbidden", ErrorType::Permission),
    ("Request failed with status code 429: Too Many Requests", ErrorType::RateLimited),
    ("413 Payload Too Large", ErrorType::LimitExceeded),
    ("Error: Request failed with status code 503", ErrorType::Network),
    ("HTTP error 404 for https://example.com/x", ErrorType::NotFound),
    // Python
    ("[Errno 2] No such file or directory: 'x.txt'", ErrorType::NotFound),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/data/in.csv'", ErrorType::NotFound),
    ("PermissionError: [Errno 13] Permission denied: '/root/x'", ErrorType::Permission),
    ("ModuleNotFoundError: No module named 'requests'", ErrorType::NotFound),
    ("ConnectionRefusedError: [Errno 111] Connection refused", ErrorType::Network),
    ("ConnectionResetError: [Errno 104] Connection reset by peer", ErrorType::Network),
    ("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/items (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3a>: Failed to establish a new connection: [Errno 111] Connection refused'))", ErrorType::Network),
    ("HTTPSConnectionPool(host='api.example.invalid', port=443): Max retries exceeded with url: / (Caused by NameResolutionError(\"<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to resolve 'api.example.invalid' ([Errno -2] Name or service not known)\"))", ErrorType::Network),
    ("requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='example.com', port=443): Read timed out. (read timeout=10)", ErrorType::Timeout),
    ("TimeoutError: [Errno 110] Connection timed out", ErrorType::Timeout),
    ("asyncio.exceptions.CancelledError", ErrorType::Cancelled),
    ("Error executing tool greet: 1 validation error for greetArguments\nname\n  Field required [type=missing, input_value={}, input_type=dict]", ErrorType::InvalidParams),
    ("jsonschema.exceptions.ValidationError: 'path' is a required property", ErrorType::InvalidParams),
    ("Unknown tool: frobnicate", ErrorType::ToolNotFound),
    // Shells and CLI tools
    ("bash: foo: command not found", ErrorType::NotFound),
    ("sh: 1: foo: not found", ErrorType::NotFound),
    ("cat: /etc/nope: No such file or directory", ErrorType::NotFound),
    ("ls: cannot open directory '/root': Permission denied", ErrorType::Permission),
    ("curl: (6) Could not resolve host: api.example.invalid", ErrorType::Network),
    ("curl: (7) Failed to connect to localhost port 8080 after 0 ms: Couldn't connect to server", ErrorType::Network),
    ("curl: (28) Operation timed out after 5001 milliseconds with 0 bytes received", ErrorType::Timeout),
    ("dial tcp: lookup api.example.invalid: no such host", ErrorType::Network),
    ("ssh: connect to host example.com port 22: No route to host", ErrorType::Network),
    // Playwright and @playwright/mcp
    ("browserType.launch: Executable doesn't exist at /root/.cache/ms-playwright/chromium-1161/chrome-linux/chrome\n╔═══════════════════════════════════════════╗\n║ Looks like Playwright was just installed or updated. ║\n║ Please run the following command to download new browsers: ║\n║     npx playwright install ║\n╚═══════════════════════════════════════════╝", ErrorType::BrowserMissing),
    ("Error: Browser specified in your config is not installed. Either install it (likely) or change the config.", ErrorType::BrowserMissing),
    ("browserType.launchPersistentContext: Chromium distribution 'chrome' is not found at /opt/google/chrome/chrome\nRun \"npx playwright install chrome\"", ErrorType::BrowserMissing),
    ("browserType.launch: \n╔══════════════════════════════════════════════════════╗\n║ Host system is missing dependencies to run browsers. ║\n╚══════════════════════════════════════════════════════╝", ErrorType::BrowserMissing),
    ("Error: Could not find Chrome (ver. 121.0.6167.85). This can occur if either\n 1. you did not perform an installation before running the script", ErrorType::BrowserMissing),
    ("page.click: Target page, context or browser has been closed", ErrorType::PageClosed),
    ("Protocol error (Target.createTarget): Target closed.", ErrorType::PageClosed),
    ("Protocol error (Runtime.callFunctionOn): Session closed. Most likely the page has been closed.", ErrorType::PageClosed),
    ("Error: No open pages available. Use the \"browser_navigate\" tool to navigate to a page first.", ErrorType::PageClosed),
    ("page.evaluate: Execution context was destroyed, most likely because of a navigation", ErrorType::PageClosed),
    ("locator.click: Timeout 30000ms exceeded.\nCall log:\n  - waiting for locator('#submit')", ErrorType::ElementNotFound),
    ("locator.fill: Timeout 5000ms exceeded.\nCall log:\n  - waiting for getByRole('textbox', { name: 'Email' })", ErrorType::ElementNotFound),
    ("Error: Ref e12 not found in the current page snapshot. Try capturing new snapshot.", ErrorType::ElementNotFound),
    ("locator.click: Error: strict mode violation: locator('button') resolved to 3 elements", ErrorType::ElementNotFound),
    ("Error: No node found for selector: #missing", ErrorType::ElementNotFound),
    ("locator.click: Timeout 30000ms exceeded.\nCall log:\n  - waiting for locator('#b')\n  - locator resolved to <button id=\"b\">Go</button>\n  - attempting click action\n  - element is not visible", ErrorType::ElementNotFound),
    ("Unable to find element with text: Submit", ErrorType::ElementNotFound),
    ("page.goto: Timeout 30000ms exceeded.\nCall log:\n  - navigating to \"https://slow.example.com/\", waiting until \"load\"", ErrorType::Timeout),
    ("page.goto: net::ERR_NAME_NOT_RESOLVED at https://nope.example.invalid/", ErrorType::Network),
    ("page.goto: net::ERR_CONNECTION_REFUSED at http://localhost:3000/", ErrorType::Network),
    ("page.goto: Protocol error (Page.navigate): Cannot navigate to invalid URL", ErrorType::InvalidParams),
    // Official MCP servers
    ("Error: Access denied - path outside allowed directories: /etc/passwd not in /work/ws", ErrorType::Permission),
    ("Error: Access denied - symlink target outside allowed directories: /etc/shadow not in /work/ws", ErrorType::Permission),
    ("Error: Parent directory does not exist: /work/ws/new/dir", ErrorType::NotFound),
    ("MCP error -32602: Input validation error: Invalid arguments for tool read_text_file: [\n  {\n    \"code\": \"invalid_type\",\n    \"expected\": \"string\",\n    \"received\": \"undefined\",\n    \"path\": [\"path\"],\n    \"message\": \"Required\"\n  }\n]", ErrorType::InvalidParams),
    ("Error: Invalid arguments for read_file: path: Expected string, received number", ErrorType::InvalidParams),
    ("MCP error -32602: Tool frobnicate not found", ErrorType::ToolNotFound),
    ("MCP error -32001: Request timed out", ErrorType::Timeout),
    ("MCP error -32000: Connection closed", ErrorType::ServerUnavailable),
    ("data/must have required property 'path'", ErrorType::InvalidParams),
    ("/url must be string", ErrorType::InvalidParams),
    // rmcp client errors as the hub sees them
    ("Transport closed", ErrorType::ServerUnavailable),
    ("Transport send error: Broken pipe (os error 32)", ErrorType::ServerUnavailable),
    ("connection closed: initialize response", ErrorType::ServerUnavailable),
    ("request timeout after PT30S", ErrorType::Timeout),
    ("task cancelled for reason request abandoned by the caller", ErrorType::Cancelled),
    ("Mcp error: -32601: Method not found", ErrorType::ToolNotFound),
    ("Mcp error: -32602: Invalid params", ErrorType::InvalidParams),
    ("Transport creation error: No such file or directory (os error 2)", ErrorType::NotFound),
    ("server 'playwright' is restarting", ErrorType::ServerUnavailable),
    ("BrokenPipeError: [Errno 32] Broken pipe", ErrorType::ServerUnavailable),
    ("Erreur réseau — connexion: ECONNRESET", ErrorType::Network),
    // Auth and limits
    ("401 Unauthorized", ErrorType::Unauthorized),
    ("Error: invalid token", ErrorType::Unauthorized),
    ("GitHub API error: Bad credentials", ErrorType::Unauthorized),
    ("request body exceeds maximum size of 1048576 bytes", ErrorType::LimitExceeded),
    ("Rate limit exceeded. Please retry after 60 seconds.", ErrorType::RateLimited),
    // Hub-made wordings and handlebars
    ("Error rendering \"step\" line 1, col 3: Variable \"step9\" not found in strict mode", ErrorType::TemplateError),
    ("tool name `read_file` is ambiguous: filesystem__read_file, other__read_file", ErrorType::AmbiguousTool),
    ("blocked by safety rule \"no-rm\"", ErrorType::SafetyBlocked),
    ("Error: Timed out 5000ms waiting for expect(locator).toHaveText(expected)", ErrorType::AssertionFailed),
    // Nothing to go on
    ("Unexpected response type", ErrorType::Unknown),
    ("Mcp error: -32603: Internal error", ErrorType::UpstreamError),
    ("something odd happened", ErrorType::Unknown),
    ("", ErrorType::Unknown),
];

#[test]
fn real_world_messages_get_their_class() {
    let failures: Vec<String> = CASES
        .iter()
        .filter(|(text, want)| classify(text) != *want)
        .map(|(text, want)| format!("{text:?}: want {want}, got {}", classify(text)))
        .collect();
    assert!(
        failures.is_empty(),
        "misclassified:\n{}",
        failures.join("\n")
    );
    assert!(CASES.len() >= 45);
}

#[test]
fn every_class_but_invalid_message_is_reachable_from_text() {
    // INVALID_MESSAGE is produced by the protocol parser, never by a tool.
    for t in ErrorType::ALL {
        if t != ErrorType::InvalidMessage {
            assert!(CASES.iter().any(|(_, c)| *c == t), "no case for {t}");
        }
    }
}

#[test]
fn wire_names_round_trip() {
    for t in ErrorType::ALL {
        assert_eq!(ErrorType::parse(t.as_str()), Some(t));
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, format!("\"{}\"", t.as_str()));
    }
}

#[test]
fn classification_ignores_case() {
    for (text, t) in [
        ("TRANSPORT CLOSED", ErrorType::ServerUnavailable),
        (
            "enoent: No Such File Or Directory, open '/x'",
            ErrorType::NotFound,
        ),
        ("executable DOESN'T exist at /x", ErrorType::BrowserMissing),
        ("Connect EconnRefused 127.0.0.1:80", ErrorType::Network),
        ("permission DENIED", ErrorType::Permission),
    ] {
        assert_eq!(classify(text), t, "{text}");
    }
}

#[test]
fn the_most_specific_cue_wins() {
    for (text, t) in [
        // timeout + locator
        ("locator.click: Timeout 5000ms exceeded.\nCall log:\n  - waiting for locator('#go')", ErrorType::ElementNotFound),
        // not found + network
        ("getaddrinfo ENOTFOUND api.example.invalid", ErrorType::Network),
        // doesn't exist + browser
        ("browserType.launch: Executable doesn't exist at /root/.cache/ms-playwright/chromium-1161/chrome-linux/chrome", ErrorType::BrowserMissing),
        // access denied + allowed directories, a missing path named
        ("Error: Access denied - path outside allowed directories: /nope/missing not in /work/ws", ErrorType::Permission),
        // -32602 + tool not found
        ("MCP error -32602: Tool frobnicate not found", ErrorType::ToolNotFound),
        // validation + the word timeout
        ("MCP error -32602: Input validation error: timeout must be number", ErrorType::InvalidParams),
        // transport + connection refused
        ("Transport send error: error sending request for url (http://127.0.0.1:8931/mcp): Connection refused", ErrorType::ServerUnavailable),
        // page closed + waiting for locator
        ("locator.click: Target page, context or browser has been closed\nCall log:\n  - waiting for locator('#x')", ErrorType::PageClosed),
        // aborted due to timeout
        ("TimeoutError: The operation was aborted due to timeout", ErrorType::Timeout),
        // a status-code-looking file name is not an auth failure
        ("ENOENT: no such file or directory, open '/tmp/401.json'", ErrorType::NotFound),
    ] {
        assert_eq!(classify(text), t, "{text}");
    }
}

#[test]
fn long_messages_are_classified_from_their_head() {
    let mut text = String::from("Transport closed\n");
    text.push_str(&"é".repeat(SCAN_LIMIT));
    assert_eq!(classify(&text), ErrorType::ServerUnavailable);
    let late = format!("{}ENOENT", "x ".repeat(SCAN_LIMIT));
    assert_eq!(classify(&late), ErrorType::Unknown);
}

#[test]
fn suggestions_use_the_message() {
    let s = suggestion_for(
        ErrorType::NotFound,
        "ENOENT: no such file or directory, open '/x/y/z.json'",
    );
    assert!(
        s.contains("/x/y/z.json") && s.contains("list_directory /x/y"),
        "{s}"
    );
    let s = suggestion_for(
        ErrorType::NotFound,
        "[Errno 2] No such file or directory: 'x.txt'",
    );
    assert!(s.contains("x.txt") && s.contains("list_directory ."), "{s}");
    let s = suggestion_for(ErrorType::NotFound, "bash: foo: command not found");
    assert!(s.contains("`foo`"), "{s}");
    let s = suggestion_for(
        ErrorType::Permission,
        "Error: Access denied - path outside allowed directories: /etc/passwd not in /work/ws",
    );
    assert!(
        s.contains("allowed directories: /work/ws") && s.contains("args"),
        "{s}"
    );
    let s = suggestion_for(
        ErrorType::Permission,
        "EACCES: permission denied, open '/srv/403.txt'",
    );
    assert!(s.contains("/srv/403.txt") && !s.contains("(403)"), "{s}");
    let s = suggestion_for(ErrorType::BrowserMissing, "browserType.launch: Executable doesn't exist at /root/.cache/ms-playwright/firefox-1466/firefox/firefox");
    assert!(
        s.contains("npx playwright install firefox")
            && s.contains("--executable-path /usr/bin/chromium"),
        "{s}"
    );
    let s = suggestion_for(
        ErrorType::ElementNotFound,
        "Ref e12 not found in the current page snapshot. Try capturing new snapshot.",
    );
    assert!(
        s.contains("ref e12") && s.contains("browser_snapshot"),
        "{s}"
    );
    let s = suggestion_for(
        ErrorType::ElementNotFound,
        "locator.click: Timeout 30000ms exceeded.\nCall log:\n  - waiting for locator('#submit')",
    );
    assert!(s.contains("locator('#submit')"), "{s}");
    let s = suggestion_for(
        ErrorType::Network,
        "getaddrinfo ENOTFOUND api.example.invalid",
    );
    assert!(s.contains("api.example.invalid"), "{s}");
    let s = suggestion_for(ErrorType::Network, "connect ECONNREFUSED 127.0.0.1:5432");
    assert!(s.contains("127.0.0.1:5432"), "{s}");
    let s = suggestion_for(ErrorType::Timeout, "page.goto: Timeout 30000ms exceeded.");
    assert!(
        s.contains("30000ms") && s.contains("taskEngine.defaultTimeout"),
        "{s}"
    );
    let s = suggestion_for(ErrorType::ToolNotFound, "Unknown tool: frobnicate");
    assert!(s.contains("`frobnicate`"), "{s}");
    let s = suggestion_for(ErrorType::ServerUnavailable, "Transport closed");
    assert!(s.contains("health_check") && s.contains("retry"), "{s}");
    let s = HubError::classified("Error: Parent directory does not exist: /work/ws/new");
    assert_eq!(s.error_type, ErrorType::NotFound);
    assert!(s.suggestion.contains("/work/ws/new") && s.suggestion.contains("create_directory"));
}

#[test]
fn suggestions_point_to_docs_protocol_md_not_the_shared_protocol_file() {
    // A clone has docs/protocol.md; PROTOCOL.md lives in a folder beside it
    // that a user does not have.
    for t in ErrorType::ALL {
        let s = suggestion_for(t, "");
        assert!(!s.contains("PROTOCOL.md"), "{t}: {s}");
    }
    let s = suggestion_for(ErrorType::InvalidMessage, "");
    assert!(s.contains("docs/protocol.md"), "{s}");
}
