//! The aggregate beyond tools: resources and resource templates (one URI
//! space), prompts, completion, resource subscriptions and the servers' log
//! level, each fanned out to the running servers that offer it.
//!
//! A URI finds its server by (1) a resource with exactly that URI in a
//! server's `resources/list`, then (2) the first server (by name) with a
//! resource template that matches it. [`ResourceOwners`] keeps what the last
//! listings said (replaced by each listing, so it follows the lists, and
//! bounded); a URI it cannot place makes the hub list every server again at
//! most once per [`RELIST_EVERY`], or at once after a server said its
//! resources changed, so unknown URIs cannot make it re-list on every
//! request.

#![allow(deprecated)] // logging and resources/subscribe: legacy, still spoken

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::join_all;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse, LoggingLevel,
    PaginatedRequestParams, Prompt, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceTemplate, ServerCapabilities, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::ServiceError;
use rmcp::{ErrorData, Peer, RoleClient};

use super::Hub;
use crate::mcp::supervisor::ServerState;

/// Bound on each server's answer to one fanned-out request.
const FAN_TIMEOUT: Duration = Duration::from_secs(30);
/// A server that sends more pages than this is cut off.
const MAX_PAGES: usize = 100;

/// The shortest time between two listings for a URI nobody listed.
pub const RELIST_EVERY: Duration = Duration::from_secs(2);
/// The most resource URIs remembered; one beyond is found by a listing.
pub const MAX_OWNERS: usize = 10_000;

/// Which server each resource URI belongs to, as the last listings said.
#[derive(Default)]
pub struct ResourceOwners {
    known: Mutex<Known>,
    /// One re-list at a time: who waits for it finds it fresh.
    relisting: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Known {
    /// Exact URIs (at most [`MAX_OWNERS`]).
    owners: HashMap<String, String>,
    /// (server, URI template), in server order.
    templates: Vec<(String, String)>,
    /// When both lists were last fetched for a lookup.
    listed: Option<tokio::time::Instant>,
}

impl ResourceOwners {
    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The server of `uri`: an exact listed resource, then a template.
    pub fn owner(&self, uri: &str) -> Option<String> {
        let k = self.known();
        if let Some(s) = k.owners.get(uri) {
            return Some(s.clone());
        }
        k.templates
            .iter()
            .find(|(_, t)| uri_template_matches(t, uri))
            .map(|(s, _)| s.clone())
    }

    /// Replace the exact URIs with a new listing of every server.
    fn set_resources<'a>(&self, all: impl Iterator<Item = (&'a String, &'a str)>) {
        let owners = all
            .take(MAX_OWNERS)
            .map(|(s, uri)| (uri.to_string(), s.clone()))
            .collect();
        self.known().owners = owners;
    }

    fn set_templates<'a>(&self, all: impl Iterator<Item = (&'a String, &'a str)>) {
        self.known().templates = all.map(|(s, t)| (s.clone(), t.to_string())).collect();
    }

    /// Listed within [`RELIST_EVERY`], and no change said since.
    fn fresh(&self) -> bool {
        self.known()
            .listed
            .is_some_and(|t| t.elapsed() < RELIST_EVERY)
    }

    fn listed_now(&self) {
        self.known().listed = Some(tokio::time::Instant::now());
    }

    /// A server said its resources changed: the next unknown URI re-lists.
    pub fn changed(&self) {
        self.known().listed = None;
    }
}

/// What a server must offer to be asked.
#[derive(Debug, Clone, Copy)]
pub enum Offer {
    Resources,
    Prompts,
    Completions,
    Logging,
    /// The tasks extension (`io.modelcontextprotocol/tasks`).
    Tasks,
}

fn offers(caps: &ServerCapabilities, what: Offer) -> bool {
    match what {
        Offer::Resources => caps.resources.is_some(),
        Offer::Prompts => caps.prompts.is_some(),
        Offer::Completions => caps.completions.is_some(),
        Offer::Logging => caps.logging.is_some(),
        Offer::Tasks => caps.supports_tasks(),
    }
}

impl Hub {
    /// Running servers whose handshake offered `what`, sorted by name.
    pub fn peers_offering(&self, what: Offer) -> Vec<(String, Peer<RoleClient>)> {
        self.server_handles()
            .into_iter()
            .filter(|h| h.status().is_some_and(|s| s.state == ServerState::Running))
            .filter_map(|h| {
                let peer = h.peer()?;
                let info = peer.peer_info()?;
                offers(&info.capabilities, what).then(|| (h.name.clone(), peer))
            })
            .collect()
    }

    /// The peer of running `server` when its handshake offered `what`.
    pub fn peer_of(&self, server: &str, what: Offer) -> Result<Peer<RoleClient>, ErrorData> {
        self.peers_offering(what)
            .into_iter()
            .find(|(n, _)| n == server)
            .map(|(_, p)| p)
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("server {server} is not running or offers no {what:?}"),
                    None,
                )
            })
    }

    /// Every server's resources (all pages), with the server's name.
    pub async fn list_resources(&self) -> Vec<(String, Resource)> {
        let all = fan_out(
            self.peers_offering(Offer::Resources),
            "resources/list",
            |peer, c| async move {
                let r = peer.list_resources(c).await?;
                Ok((r.resources, r.next_cursor))
            },
        )
        .await;
        self.resource_owner
            .set_resources(all.iter().map(|(s, r)| (s, r.uri.as_str())));
        all
    }

    /// Every server's resource templates, with the server's name.
    pub async fn list_resource_templates(&self) -> Vec<(String, ResourceTemplate)> {
        let all = fan_out(
            self.peers_offering(Offer::Resources),
            "resources/templates/list",
            |peer, c| async move {
                let r = peer.list_resource_templates(c).await?;
                Ok((r.resource_templates, r.next_cursor))
            },
        )
        .await;
        self.resource_owner
            .set_templates(all.iter().map(|(s, t)| (s, t.uri_template.as_str())));
        all
    }

    /// A server's resources changed (`notifications/resources/list_changed`).
    pub fn resources_changed(&self) {
        self.resource_owner.changed();
    }

    /// The server a resource URI belongs to (see the module docs).
    pub async fn resource_server(&self, uri: &str) -> Result<String, ErrorData> {
        let owners = &self.resource_owner;
        if let Some(s) = owners.owner(uri) {
            return Ok(s);
        }
        {
            let _one = owners.relisting.lock().await;
            if !owners.fresh() {
                futures::join!(self.list_resources(), self.list_resource_templates());
                owners.listed_now();
            }
        }
        owners.owner(uri).ok_or_else(|| no_resource(uri))
    }

    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, ErrorData> {
        let server = self.resource_server(uri).await?;
        let peer = self.peer_of(&server, Offer::Resources)?;
        let read = peer.read_resource(ReadResourceRequestParams::new(uri));
        bounded(&server, read).await
    }

    /// `resources/subscribe` (`on`) or `unsubscribe` at the URI's server.
    pub async fn subscribe_resource(&self, uri: &str, on: bool) -> Result<(), ErrorData> {
        let server = self.resource_server(uri).await?;
        let peer = self.peer_of(&server, Offer::Resources)?;
        if on {
            bounded(&server, peer.subscribe(SubscribeRequestParams::new(uri))).await
        } else {
            bounded(
                &server,
                peer.unsubscribe(UnsubscribeRequestParams::new(uri)),
            )
            .await
        }
    }

    /// Every server's prompts, with the server's name.
    pub async fn list_prompts(&self) -> Vec<(String, Prompt)> {
        fan_out(
            self.peers_offering(Offer::Prompts),
            "prompts/list",
            |peer, c| async move {
                let r = peer.list_prompts(c).await?;
                Ok((r.prompts, r.next_cursor))
            },
        )
        .await
    }

    /// `prompts/get` of the server's own prompt `params.name`: its result,
    /// or (a 2026-07-28 server) its `InputRequiredResult`, one round only
    /// (the endpoint answers it, or hands it to its client).
    pub async fn get_prompt(
        &self,
        server: &str,
        params: GetPromptRequestParams,
    ) -> Result<GetPromptResponse, ErrorData> {
        let peer = self.peer_of(server, Offer::Prompts)?;
        bounded(server, peer.get_prompt_once(params)).await
    }

    /// `completion/complete` at one server (names already mapped back).
    pub async fn complete(
        &self,
        server: &str,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, ErrorData> {
        let peer = self.peer_of(server, Offer::Completions)?;
        bounded(server, peer.complete(params)).await
    }

    /// Set every running server that offers logging to `level`.
    pub async fn set_log_level(&self, level: LoggingLevel) {
        let peers = self.peers_offering(Offer::Logging);
        join_all(peers.into_iter().map(|(server, peer)| async move {
            let set = peer.set_level(SetLevelRequestParams::new(level));
            if let Err(e) = bounded(&server, set).await {
                tracing::debug!(server, error = %e.message, "logging/setLevel refused");
            }
        }))
        .await;
    }
}

/// The error for a resource URI no server offers (also what a view
/// answers for another server's resource).
pub fn no_resource(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("no server offers the resource {uri:?}; call resources/list and resources/templates/list to see what exists"),
        None,
    )
}

/// One request to one server under [`FAN_TIMEOUT`], errors as `ErrorData`.
async fn bounded<T>(
    server: &str,
    work: impl std::future::Future<Output = Result<T, ServiceError>>,
) -> Result<T, ErrorData> {
    match tokio::time::timeout(FAN_TIMEOUT, work).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(ServiceError::McpError(e))) => Err(e),
        Ok(Err(e)) => Err(ErrorData::internal_error(
            format!("server {server}: {e}"),
            None,
        )),
        Err(_) => Err(ErrorData::internal_error(
            format!(
                "server {server} did not answer within {} s",
                FAN_TIMEOUT.as_secs()
            ),
            None,
        )),
    }
}

/// Follow cursors with a repeat guard and a page cap, under one timeout.
/// Every page of one list from each peer, concurrently, tagged with the
/// server's name; a server whose listing fails is logged and left out.
async fn fan_out<T, F, Fut>(
    peers: Vec<(String, Peer<RoleClient>)>,
    what: &str,
    list: F,
) -> Vec<(String, T)>
where
    F: Fn(Peer<RoleClient>, Option<PaginatedRequestParams>) -> Fut + Clone,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
{
    let per = join_all(peers.into_iter().map(|(name, peer)| {
        let list = list.clone();
        async move {
            let all = pages(|c| list(peer.clone(), c)).await;
            (name, all)
        }
    }))
    .await;
    let mut out = Vec::new();
    for (server, r) in per {
        match r {
            Ok(items) => out.extend(items.into_iter().map(|t| (server.clone(), t))),
            Err(e) => tracing::warn!(server, error = %e, "{what} failed"),
        }
    }
    out
}

async fn pages<T, F, Fut>(mut page: F) -> Result<Vec<T>, String>
where
    F: FnMut(Option<PaginatedRequestParams>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
{
    let work = async {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor
                .clone()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let (items, next) = page(params).await.map_err(|e| e.to_string())?;
            out.extend(items);
            match next {
                Some(c) if !c.is_empty() && seen.insert(c.clone()) => cursor = Some(c),
                _ => return Ok(out),
            }
        }
        Err(format!("more than {MAX_PAGES} pages"))
    };
    tokio::time::timeout(FAN_TIMEOUT, work)
        .await
        .map_err(|_| format!("no answer within {} s", FAN_TIMEOUT.as_secs()))?
}

/// Does an RFC 6570 template (`test://template/{id}/data`) match `uri`? A
/// simple `{var}` matches one or more characters other than `/ ? #`; a
/// reserved expansion (`{+var}`, `{#var}`) or any other operator matches
/// anything non-empty.
pub fn uri_template_matches(template: &str, uri: &str) -> bool {
    let mut pattern = String::from("^");
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        pattern.push_str(&regex::escape(&rest[..open]));
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        let expr = &rest[open + 1..open + close];
        let simple = expr
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        pattern.push_str(if simple { "[^/?#]+" } else { ".+" });
        rest = &rest[open + close + 1..];
    }
    pattern.push_str(&regex::escape(rest));
    pattern.push('$');
    regex::Regex::new(&pattern).is_ok_and(|re| re.is_match(uri))
}

#[cfg(test)]
mod tests {
    use super::uri_template_matches as m;
    use super::{ResourceOwners, MAX_OWNERS, RELIST_EVERY};

    fn listed(o: &ResourceOwners, server: &str, uris: &[String]) {
        let s = server.to_string();
        o.set_resources(uris.iter().map(|u| (&s, u.as_str())));
    }

    #[test]
    fn owners_follow_the_listings_and_stay_bounded() {
        let o = ResourceOwners::default();
        listed(&o, "a", &["x://1".into(), "x://2".into()]);
        assert_eq!(o.owner("x://1").as_deref(), Some("a"));
        // The next listing no longer has x://1: it is forgotten.
        listed(&o, "b", &["x://2".into()]);
        assert_eq!(o.owner("x://1"), None);
        assert_eq!(o.owner("x://2").as_deref(), Some("b"));
        let s = "t".to_string();
        o.set_templates(std::iter::once((&s, "x://t/{id}")));
        assert_eq!(o.owner("x://t/9").as_deref(), Some("t"));
        let many: Vec<String> = (0..MAX_OWNERS + 500).map(|i| format!("y://{i}")).collect();
        listed(&o, "a", &many);
        assert_eq!(o.known().owners.len(), MAX_OWNERS);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unknown_uri_relists_at_most_once_per_interval_or_after_a_change() {
        let o = ResourceOwners::default();
        assert!(!o.fresh(), "never listed");
        o.listed_now();
        assert!(o.fresh());
        tokio::time::advance(RELIST_EVERY / 2).await;
        assert!(o.fresh(), "no second listing this soon");
        o.changed();
        assert!(!o.fresh(), "a server said its resources changed");
        o.listed_now();
        tokio::time::advance(RELIST_EVERY).await;
        assert!(!o.fresh());
    }

    #[test]
    fn uri_templates_match_simple_and_reserved_expressions() {
        assert!(m("test://template/{id}/data", "test://template/123/data"));
        assert!(!m("test://template/{id}/data", "test://template/1/2/data"));
        assert!(!m("test://template/{id}/data", "test://template//data"));
        assert!(m("file:///{+path}", "file:///a/b/c.txt"));
        assert!(m("x://{a}.{b}", "x://one.two"));
        assert!(!m("x://fixed", "x://fixed2"));
        assert!(m("x://fixed", "x://fixed"));
        assert!(!m("x://{broken", "x://anything"));
    }
}
