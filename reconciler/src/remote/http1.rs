//! The one HTTP/1.1 exchange of a health check, written and read by hand (pure): a GET with a
//! bearer token, and its answer by `Content-Length` or chunks. What a check over a kept
//! connection needs and nothing more ([`crate::remote::kept`]); every other call to a peer goes
//! through kube's client.

/// Largest answer read from a peer's API server: every call there reads or writes one small
/// object. A hostile server streaming without end fails the call instead of filling our memory.
pub const MAX_API_ANSWER: usize = 4 << 20;

/// An API server's answer: its status code and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// The Kubernetes Status an answer that is not a success carries, as kube reads one: its body's
/// Status, or (a body that is none) its text under the answer's code.
pub fn status_of(answer: &Answer) -> kube::core::Status {
    match serde_json::from_slice::<kube::core::Status>(&answer.body) {
        Ok(status) if status.code != 0 => status,
        Ok(status) => status.with_code(answer.status),
        Err(_) => {
            kube::core::Status::failure(&String::from_utf8_lossy(&answer.body), "Failed to parse error data").with_code(answer.status)
        }
    }
}

/// What was read so far makes: not a whole answer yet, or one (and whether the connection may
/// carry another request).
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Partial,
    Whole { answer: Answer, reusable: bool },
}

/// The request bytes of `GET path` to `authority` (`host:port`), with `token` when given.
pub fn get(authority: &str, path: &str, token: Option<&str>) -> Vec<u8> {
    let mut request = Vec::with_capacity(160 + path.len() + token.map_or(0, str::len));
    for part in ["GET ", path, " HTTP/1.1\r\nHost: ", authority, "\r\nAccept: application/json\r\nUser-Agent: liqo-reconciler\r\n"] {
        request.extend_from_slice(part.as_bytes());
    }
    if let Some(token) = token {
        for part in ["Authorization: Bearer ", token, "\r\n"] {
            request.extend_from_slice(part.as_bytes());
        }
    }
    request.extend_from_slice(b"\r\n");
    request
}

/// Reads an answer from `bytes` (all that arrived so far; `ended`: the peer closed its side
/// after them). An answer with neither a length nor chunks ends with the connection.
pub fn parse(bytes: &[u8], ended: bool) -> Result<Parsed, String> {
    let mut headers = [httparse::EMPTY_HEADER; 48];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(bytes).map_err(|e| format!("an answer that is not HTTP: {e}"))? {
        httparse::Status::Partial if ended => return Err("the connection ended before a whole answer".to_owned()),
        httparse::Status::Partial => return Ok(Parsed::Partial),
        httparse::Status::Complete(head) => head,
    };
    let status = response.code.unwrap_or_default();
    if (100..200).contains(&status) {
        // An interim answer (100 Continue) before the real one: not sent to a GET.
        return Err(format!("an interim answer {status} to a GET"));
    }
    let header = |name: &str| response.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value);
    let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
    let chunked = header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case(b"chunked"));
    let length = match header("content-length") {
        Some(v) => Some(std::str::from_utf8(v).ok().and_then(|v| v.trim().parse::<usize>().ok()).ok_or("a malformed Content-Length")?),
        None => None,
    };
    let rest = &bytes[head..];
    let body = if chunked {
        match dechunk(rest)? {
            Some(body) => body,
            None if ended => return Err("the connection ended inside a chunked answer".to_owned()),
            None => return Ok(Parsed::Partial),
        }
    } else if let Some(length) = length {
        if length > MAX_API_ANSWER {
            return Err(format!("an answer of {length} bytes, over {MAX_API_ANSWER}"));
        }
        if rest.len() < length {
            return if ended { Err("the connection ended inside an answer".to_owned()) } else { Ok(Parsed::Partial) };
        }
        rest[..length].to_vec()
    } else if status == 204 || status == 304 {
        Vec::new()
    } else if ended {
        rest.to_vec()
    } else {
        return if rest.len() > MAX_API_ANSWER { Err(format!("an answer over {MAX_API_ANSWER} bytes")) } else { Ok(Parsed::Partial) };
    };
    let delimited = chunked || length.is_some() || status == 204 || status == 304;
    let reusable = delimited && !close && response.version == Some(1);
    Ok(Parsed::Whole { answer: Answer { status, body }, reusable })
}

/// The body of a chunked answer (RFC 9112 §7.1), `None` while its last chunk has not arrived.
fn dechunk(mut rest: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = find_crlf(rest) else { return Ok(None) };
        let size_text = std::str::from_utf8(&rest[..line_end]).map_err(|_| "a malformed chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| format!("a malformed chunk size {size_text:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            // Trailers, if any, then an empty line.
            loop {
                let Some(end) = find_crlf(rest) else { return Ok(None) };
                if end == 0 {
                    return Ok(Some(body));
                }
                rest = &rest[end + 2..];
            }
        }
        if body.len() + size > MAX_API_ANSWER {
            return Err(format!("a chunked answer over {MAX_API_ANSWER} bytes"));
        }
        if rest.len() < size + 2 {
            return Ok(None);
        }
        if &rest[size..size + 2] != b"\r\n" {
            return Err("a chunk not ended by CRLF".to_owned());
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(bytes: &[u8]) -> (Answer, bool) {
        match parse(bytes, false).unwrap() {
            Parsed::Whole { answer, reusable } => (answer, reusable),
            Parsed::Partial => panic!("partial: {}", String::from_utf8_lossy(bytes)),
        }
    }

    #[test]
    fn a_failure_reads_as_kube_reads_it() {
        let not_found = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"peeringrequests \"x\" not found","reason":"NotFound","code":404}"#;
        let status = status_of(&Answer { status: 404, body: not_found.to_vec() });
        assert!(status.is_not_found() && status.code == 404, "{status:?}");
        let page = status_of(&Answer { status: 404, body: b"404 page not found".to_vec() });
        assert!(!page.is_not_found() && page.code == 404 && page.message == "404 page not found", "{page:?}");
        let no_code = status_of(&Answer { status: 401, body: br#"{"kind":"Status","message":"Unauthorized"}"#.to_vec() });
        assert_eq!(no_code.code, 401);
    }

    #[test]
    fn a_get_names_its_host_and_token() {
        let request = get("10.0.0.1:6443", "/version", Some("abc"));
        let text = String::from_utf8(request).unwrap();
        assert!(text.starts_with("GET /version HTTP/1.1\r\nHost: 10.0.0.1:6443\r\n"), "{text}");
        assert!(text.contains("\r\nAuthorization: Bearer abc\r\n") && text.ends_with("\r\n\r\n"), "{text}");
        let anonymous = String::from_utf8(get("h:1", "/version", None)).unwrap();
        assert!(!anonymous.contains("Authorization"), "{anonymous}");
        // httparse reads it back as one request.
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut parsed = httparse::Request::new(&mut headers);
        assert!(parsed.parse(text.as_bytes()).unwrap().is_complete());
        assert_eq!((parsed.method, parsed.path), (Some("GET"), Some("/version")));
    }

    #[test]
    fn an_answer_by_length_is_whole_when_all_of_it_arrived() {
        let bytes = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut], false).unwrap(), Parsed::Partial, "{cut}");
            assert!(parse(&bytes[..cut], true).is_err(), "ended at {cut}");
        }
        assert_eq!(whole(bytes), (Answer { status: 200, body: b"{\"a\":1}".to_vec() }, true));
        let closing = b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(whole(closing), (Answer { status: 404, body: Vec::new() }, false), "the server closes after it");
        let old = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert!(!whole(old).1, "HTTP/1.0 keeps no connection unless asked");
    }

    #[test]
    fn a_chunked_answer_is_put_together() {
        let bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: z\r\n\r\n";
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut], false).unwrap(), Parsed::Partial, "{cut}");
        }
        assert_eq!(whole(bytes), (Answer { status: 200, body: b"Wikipedia".to_vec() }, true));
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false).is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", false).is_err(), "a chunk longer than said");
    }

    #[test]
    fn an_answer_without_a_length_ends_with_the_connection_and_huge_ones_are_refused() {
        let bytes = b"HTTP/1.1 200 OK\r\n\r\nhello";
        assert_eq!(parse(bytes, false).unwrap(), Parsed::Partial);
        match parse(bytes, true).unwrap() {
            Parsed::Whole { answer, reusable } => assert_eq!((answer.body.as_slice(), reusable), (&b"hello"[..], false)),
            Parsed::Partial => panic!("ended"),
        }
        let huge = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", MAX_API_ANSWER + 1);
        assert!(parse(huge.as_bytes(), false).is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false).is_err());
        assert!(parse(b"SSH-2.0-OpenSSH\r\n", false).is_err(), "not HTTP");
        assert!(parse(b"HTTP/1.1 100 Continue\r\n\r\n", false).is_err());
    }
}
