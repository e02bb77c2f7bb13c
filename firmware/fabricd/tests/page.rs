//! The typing page at `/`: served whole whatever the `Accept`, with no
//! external assets; any other path, or a method it does not take, a typed
//! answer. Its behaviour in a browser is `tests/browser/`.

mod common;

use bytes::Bytes;
use common::{get, request, small_completion, Daemon};
use http_body_util::Full;
use hyper::Request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn get_with(path: &str, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    let mut b = Request::get(path).header("host", "test");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Full::new(Bytes::new())).expect("request")
}

/// A request written byte for byte, for paths a client library would
/// tidy up; the answer's status and body.
async fn raw(addr: std::net::SocketAddr, head: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("write");
    let mut got = Vec::new();
    tokio::time::timeout(common::READY_WITHIN, s.read_to_end(&mut got))
        .await
        .expect("an answer")
        .expect("read");
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_whole_and_other_paths_get_typed_answers() {
    let d = Daemon::start(|s| s.time_scale = 0.05, |_| {}).await;
    let a = d.addr;

    let r = get(a, "/").await.expect("page");
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "text/html; charset=utf-8");
    let csp = r.headers["content-security-policy"].to_str().expect("csp");
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"));
    let page = r.text();
    assert!(page.contains(r#"<textarea id="text""#), "{page}");
    assert!(page.contains(r#"id="suggestion""#));
    assert!(page.contains("/v1/completions") && page.contains("session"));
    // Nothing from elsewhere: no URL with a scheme, no src or href at all.
    for needle in ["http://", "https://", "src=", "href=", "@import", "url("] {
        assert!(!page.contains(needle), "the page refers to {needle}");
    }

    // The same page, whatever the Accept says.
    let huge = "x/y;q=0.1, ".repeat(600);
    for accept in [
        "application/json",
        "image/png",
        "text/html;q=0",
        "*/*;q=banana",
        "",
        huge.as_str(),
    ] {
        let r = request(a, get_with("/", &[("accept", accept)]))
            .await
            .expect("page");
        assert_eq!(
            (r.status, r.text() == page),
            (200, true),
            "Accept {accept:?}"
        );
    }
    // A query string is the page's own options.
    let r = get(a, "/?model=kjv&debounce_ms=50").await.expect("page");
    assert_eq!(r.status, 200);

    // Any other path is the typed 404, never the page.
    for path in [
        "/index.html",
        "//",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/page.html",
        "/%3Cscript%3Ealert(1)%3C/script%3E",
    ] {
        let r = request(a, get_with(path, &[("accept", "text/html")]))
            .await
            .expect("404");
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.headers["content-type"], "application/json", "{path}");
        assert_eq!(r.json()["error"]["code"], "unknown_url", "{path}");
    }
    for path in [
        "/../../etc/passwd",
        "/./",
        "/<script>alert(1)</script>",
        "/\u{1}",
    ] {
        let (status, body) = raw(
            a,
            &format!("GET {path} HTTP/1.1\r\nHost: test\r\nAccept: text/html\r\nConnection: close\r\n\r\n"),
        )
        .await;
        // A typed 404, or hyper's 400 for a request line it cannot parse;
        // never the page.
        assert!(status == 404 || status == 400, "{path:?}: {status}");
        assert!(!body.contains("<textarea"), "{path:?}");
    }
    let long = format!("/{}", "a".repeat(4000));
    let r = get(a, &long).await.expect("404");
    assert_eq!(r.json()["error"]["code"], "unknown_url");

    // The page is GET only.
    let r = request(
        a,
        Request::post("/")
            .header("host", "test")
            .body(Full::new(Bytes::from_static(b"x")))
            .expect("request"),
    )
    .await
    .expect("405");
    assert_eq!(r.status, 405);
    assert_eq!(r.headers["allow"], "GET");
    assert_eq!(r.json()["error"]["code"], "method_not_allowed");

    // And the daemon still serves completions.
    assert_eq!(small_completion(a, "And God said", 0).await, 200);
    d.stop().await;
}
