//! Where a callback may go. By default only to `https` on a public address: an asker (an
//! agent, a person who may ask) must not make askgate reach what only askgate can reach — its
//! own host, the network it runs in, a cloud's metadata service at 169.254.169.254. The
//! operator opens a target with `[callbacks] allow`; askgate's own address stays closed even then.
//!
//! A URL is checked when it is asked for (an address written in it is refused with a 400 there),
//! and again at every delivery: a name is resolved by [`PublicOnly`], which hands the
//! connection only the addresses that pass, so a name cannot move inside between the check and
//! the connection.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

use crate::config::CallbacksConfig;

/// The rules: the operator's list and askgate's own address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallbackRules {
    listed: CallbacksConfig,
    /// Where askgate listens; none: not known (nothing is refused as askgate's own then).
    listening: Option<SocketAddr>,
    /// `gateway.public_url`: askgate as people reach it.
    page: Option<Url>,
}

/// How a delivery reaches a URL that passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reach {
    /// An `allow` entry lists it: as the operator wrote it, its name resolved as any other.
    Listed,
    /// A public address, or a name resolved through [`PublicOnly`].
    Public,
}

impl CallbackRules {
    /// The rules of `listed`, for an askgate listening on `listening` whose page is `page_url`.
    pub fn new(listed: CallbacksConfig, listening: SocketAddr, page_url: Option<&str>) -> Self {
        let page = page_url.and_then(|u| Url::parse(u).ok());
        Self { listed, listening: Some(listening), page }
    }

    /// Checks a callback URL as it is asked for: an absolute `http(s)` URL with a host, which
    /// is askgate's own address in no form, and is either listed or `https` to a public
    /// address (a name is checked when it is resolved, at delivery).
    ///
    /// # Errors
    /// What is wrong, naming the rule and the key that opens a target.
    pub fn check(&self, url: &str) -> Result<(), String> {
        let parsed = Url::parse(url).map_err(|e| format!("callback url: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(format!("callback url `{}` is not an http(s) URL with a host", origin(&parsed)));
        }
        self.reach(&parsed).map(|_| ())
    }

    /// How a delivery may reach `url`, by the rules as they are now.
    ///
    /// # Errors
    /// Why it may not.
    pub(super) fn reach(&self, url: &Url) -> Result<Reach, String> {
        let refused = |why: String| {
            let fix = format!("{}://{}:{}", url.scheme(), host_of(url), url.port_or_known_default().unwrap_or(0));
            format!(
                "callback url `{}`: {why}. A callback goes to https on a public address unless the operator lists its \
                 target in [callbacks] allow (e.g. allow = [\"{fix}\"])",
                origin(url)
            )
        };
        if let Some(why) = self.own(url) {
            return Err(format!(
                "callback url `{}` is {why}: askgate does not call itself, whatever [callbacks] allow lists",
                origin(url)
            ));
        }
        if self.listed.lists(url) {
            return Ok(Reach::Listed);
        }
        if url.scheme() != "https" {
            return Err(refused(format!("`{}` is not https", url.scheme())));
        }
        match url.host() {
            Some(Host::Ipv4(ip)) => refusal(IpAddr::V4(ip)).map_or(Ok(Reach::Public), |why| Err(refused(why))),
            Some(Host::Ipv6(ip)) => refusal(IpAddr::V6(ip)).map_or(Ok(Reach::Public), |why| Err(refused(why))),
            Some(Host::Domain(_)) => Ok(Reach::Public),
            None => Err(format!("callback url `{}` has no host", origin(url))),
        }
    }

    /// Why `url` is askgate itself, if it is: its page's origin, or its listening socket
    /// (any address of its host on its port, when it listens on all of them).
    fn own(&self, url: &Url) -> Option<String> {
        if let Some(page) = &self.page
            && page.origin() == url.origin()
        {
            return Some("askgate's own address (gateway.public_url)".to_owned());
        }
        let listening = self.listening?;
        let ip = match url.host()? {
            Host::Ipv4(ip) => IpAddr::V4(ip),
            Host::Ipv6(ip) => ip.to_canonical(),
            Host::Domain(_) => return None,
        };
        let same = url.port_or_known_default() == Some(listening.port())
            && (ip == listening.ip().to_canonical() || listening.ip().is_unspecified() && of_this_host(ip));
        same.then(|| format!("askgate's own address ({listening})"))
    }
}

/// `scheme://host[:port]`: the URL without the path and query, which may carry a token.
pub(super) fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

fn host_of(url: &Url) -> String {
    url.host_str().unwrap_or_default().to_owned()
}

/// Why a callback may not connect to `ip` unless listed: the range it is in, or that it is
/// an address of askgate's own host; none for a public address.
pub fn refusal(ip: IpAddr) -> Option<String> {
    let ip = ip.to_canonical();
    if let Some(range) = range(ip) {
        return Some(format!("{ip} is {range}"));
    }
    of_this_host(ip).then(|| format!("{ip} is an address of askgate's own host"))
}

/// The range `ip` is in when it is not a public unicast address. std has no `is_global` on
/// stable Rust, and the few prefixes beyond its `is_private`/`is_loopback`/… are written here.
fn range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => range_v4(v4),
        IpAddr::V6(v6) => range_v6(v6),
    }
}

fn range_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => "unspecified (0.0.0.0/8)",
        (127, _, _) => "loopback (127.0.0.0/8)",
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => "private (10/8, 172.16/12, 192.168/16)",
        (100, 64..=127, _) => "shared address space (100.64.0.0/10)",
        (169, 254, _) => "link-local (169.254.0.0/16, where clouds serve instance metadata)",
        (224..=239, _, _) => "multicast (224.0.0.0/4)",
        (255, 255, 255) if ip.is_broadcast() => "broadcast",
        (240..=255, _, _) => "reserved (240.0.0.0/4)",
        (192, 0, 0) => "reserved for protocol assignments (192.0.0.0/24)",
        (198, 18..=19, _) => "reserved for benchmarking (198.18.0.0/15)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "reserved for documentation",
        _ => return None,
    })
}

fn range_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded = |high: u16, low: u16| Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
    Some(match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => "unspecified (::)",
        [0, 0, 0, 0, 0, 0, 0, 1] => "loopback (::1)",
        // IPv4-mapped forms are read as their IPv4 address by `to_canonical`, before this.
        [0, 0, 0, 0, 0, 0, _, _] => "IPv4-compatible (::/96, deprecated)",
        [0x64, 0xff9b, 0, 0, 0, 0, high, low] => return range_v4(embedded(high, low)),
        [0x64, 0xff9b, 1, ..] => "NAT64 for local use (64:ff9b:1::/48)",
        [0x100, 0, 0, 0, ..] => "discard-only (100::/64)",
        [0x2001, 0, ..] => "Teredo (2001::/32)",
        [0x2001, 0xdb8, ..] => "reserved for documentation (2001:db8::/32)",
        [0x2002, high, low, ..] => return range_v4(embedded(high, low)),
        [first, ..] if first & 0xfe00 == 0xfc00 => "unique-local (fc00::/7)",
        [first, ..] if first & 0xffc0 == 0xfe80 => "link-local (fe80::/10)",
        [first, ..] if first & 0xffc0 == 0xfec0 => "site-local (fec0::/10, deprecated)",
        [first, ..] if first & 0xff00 == 0xff00 => "multicast (ff00::/8)",
        _ => return None,
    })
}

/// Whether `ip` is an address of this host. The kernel answers without a packet sent: a UDP
/// socket connected to one of the host's own addresses is given that address as its source.
/// (A list of interfaces would need a crate or `getifaddrs`, and could change under it.)
fn of_this_host(ip: IpAddr) -> bool {
    let any: IpAddr = if ip.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    let Ok(socket) = UdpSocket::bind((any, 0)) else { return false };
    socket.connect((ip, 9)).is_ok() && socket.local_addr().is_ok_and(|local| local.ip() == ip)
}

/// Resolves names for callbacks no `allow` entry lists: the addresses that pass (public,
/// not askgate's host) are the only ones the connection may use; a name with none fails the
/// attempt with what it resolved to.
pub(super) struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let (public, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
                resolved.into_iter().partition(|addr| refusal(addr.ip()).is_none());
            if public.is_empty() {
                let why = refused.first().and_then(|a| refusal(a.ip())).unwrap_or_else(|| "nothing".to_owned());
                let message = format!(
                    "`{host}` resolves to no public address ({why}); list the target in [callbacks] allow to let \
                     callbacks reach it"
                );
                return Err(message.into());
            }
            let addrs: Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CallbackTarget;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn every_range_an_asker_could_aim_inside_is_refused_and_public_addresses_pass() {
        for inside in [
            "127.0.0.1",
            "127.8.9.10",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.254",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "198.18.0.1",
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::8.8.8.8",
            "64:ff9b::10.0.0.1",
            "2002:a9fe:a9fe::1",
            "2001::1",
            "2001:db8::1",
            "fec0::1",
        ] {
            assert!(refusal(ip(inside)).is_some(), "{inside} passed");
        }
        for public in ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert_eq!(refusal(ip(public)), None, "{public}");
        }
        assert!(refusal(ip("169.254.169.254")).unwrap().contains("link-local"));
        assert!(refusal(ip("::ffff:10.0.0.1")).unwrap().starts_with("10.0.0.1 is private"));
    }

    #[test]
    fn a_url_passes_when_https_to_a_public_address_or_listed_and_never_when_it_is_askgate() {
        let listed = CallbacksConfig { allow: vec![CallbackTarget::parse("http://127.0.0.1:9000/hooks").unwrap()] };
        let rules = CallbackRules::new(listed, "127.0.0.1:8080".parse().unwrap(), Some("https://askgate.example/"));
        assert_eq!(rules.check("https://8.8.8.8/done"), Ok(()));
        assert_eq!(rules.check("https://relay.example/done?t=1"), Ok(()), "a name is checked when resolved");
        assert_eq!(rules.check("http://127.0.0.1:9000/hooks/done"), Ok(()));
        let refused = |url: &str| rules.check(url).unwrap_err();
        let loopback = refused("https://127.0.0.1:9000/elsewhere?token=secret");
        assert!(loopback.contains("loopback") && loopback.contains("[callbacks] allow"), "{loopback}");
        assert!(!loopback.contains("secret"), "the path and query are not repeated: {loopback}");
        assert!(refused("http://8.8.8.8/").contains("not https"));
        assert!(refused("https://[::1]/").contains("loopback"));
        assert!(refused("https://169.254.169.254/latest/meta-data/").contains("link-local"));
        assert!(refused("https://2130706433/").contains("loopback"), "127.0.0.1 as a number");
        assert!(refused("https://askgate.example/api/questions").contains("gateway.public_url"));
        let own = CallbackRules::new(
            CallbacksConfig { allow: vec![CallbackTarget::parse("http://127.0.0.1:8080").unwrap()] },
            "127.0.0.1:8080".parse().unwrap(),
            None,
        );
        let itself = own.check("http://127.0.0.1:8080/api/questions").unwrap_err();
        assert!(itself.contains("askgate's own address"), "{itself}");
        assert!(refused("ftp://8.8.8.8/").contains("not an http(s) URL"));
    }

    #[tokio::test]
    async fn a_name_resolves_only_to_the_addresses_that_pass() {
        let refused = PublicOnly.resolve("localhost".parse().unwrap()).await.err().unwrap().to_string();
        assert!(refused.contains("resolves to no public address") && refused.contains("loopback"), "{refused}");
    }
}
