//! The per-source rate limit on `POST /identity`, the one call that checks a secret: a token
//! bucket per client address (an IPv6 client by its /64, which one host usually holds whole),
//! so guessing tokens is slow, and a refused caller is told when to come back. Pure: time is
//! passed in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many requests a source may make.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Requests a source may make at once after a quiet spell.
    pub burst: u32,
    /// Requests a source regains per minute.
    pub per_minute: u32,
}

impl Default for Rate {
    /// 5 at once, then one every 6 s: a peer asks once per peering; a guesser gets 14,400 a day.
    fn default() -> Self {
        Self { burst: 5, per_minute: 10 }
    }
}

/// The sources followed at most; past this, the oldest is forgotten.
pub const MAX_SOURCES: usize = 10_000;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets by source.
#[derive(Debug)]
pub struct Limiter {
    rate: Rate,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl Limiter {
    pub fn new(rate: Rate) -> Self {
        Self { rate, buckets: Mutex::default() }
    }

    /// Takes one request's token for `source` at `now`; when there is none, how long until
    /// there is.
    pub fn take(&self, source: IpAddr, now: Instant) -> Result<(), Duration> {
        let (burst, per_second) = (f64::from(self.rate.burst.max(1)), f64::from(self.rate.per_minute.max(1)) / 60.0);
        let key = source_key(source);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_SOURCES && !buckets.contains_key(&key) {
            forget_oldest(&mut buckets);
        }
        let bucket = buckets.entry(key).or_insert(Bucket { tokens: burst, at: now });
        bucket.tokens = (bucket.tokens + now.saturating_duration_since(bucket.at).as_secs_f64() * per_second).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_second))
        }
    }

    /// How many sources are followed.
    pub fn sources(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The address a bucket belongs to: IPv4 as is (and IPv4-mapped IPv6 as IPv4), IPv6 by /64.
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

fn forget_oldest(buckets: &mut HashMap<IpAddr, Bucket>) {
    if let Some(oldest) = buckets.iter().min_by_key(|(_, b)| b.at).map(|(k, _)| *k) {
        buckets.remove(&oldest);
    }
}

/// The `Retry-After` value for a wait: whole seconds, rounded up, at least 1.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0).max(u64::from(wait.is_zero()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn a_burst_then_one_per_period() {
        let l = Limiter::new(Rate { burst: 3, per_minute: 6 });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.take(A, t0), Ok(()));
        }
        let wait = l.take(A, t0).unwrap_err();
        assert_eq!(wait, Duration::from_secs(10), "6 a minute: one every 10 s");
        assert_eq!(l.take(B, t0), Ok(()), "another source has its own bucket");
        assert!(l.take(A, t0 + Duration::from_secs(9)).is_err());
        assert_eq!(l.take(A, t0 + Duration::from_secs(10)), Ok(()));
        // A long quiet spell refills up to the burst, no more.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert_eq!(l.take(A, later), Ok(()));
        }
        assert!(l.take(A, later).is_err());
    }

    #[test]
    fn an_ipv6_host_is_one_source_per_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_key(a), source_key(b));
        assert_ne!(source_key(a), source_key(other));
        assert_eq!(source_key("::ffff:10.0.0.1".parse().unwrap()), A);
        let l = Limiter::new(Rate { burst: 1, per_minute: 1 });
        let now = Instant::now();
        assert!(l.take(a, now).is_ok());
        assert!(l.take(b, now).is_err(), "rotating the interface ID does not help");
        assert!(l.take(other, now).is_ok());
    }

    #[test]
    fn the_sources_followed_are_bounded() {
        let l = Limiter::new(Rate::default());
        let now = Instant::now();
        for i in 0..(MAX_SOURCES as u32 + 50) {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let _ = l.take(ip, now + Duration::from_millis(u64::from(i)));
        }
        assert_eq!(l.sources(), MAX_SOURCES);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_seconds(Duration::from_millis(100)), 1);
        assert_eq!(retry_after_seconds(Duration::from_secs(6)), 6);
        assert_eq!(retry_after_seconds(Duration::from_millis(6001)), 7);
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
    }
}
