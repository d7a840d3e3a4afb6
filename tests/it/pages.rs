//! A page server for browser tests: every request on a loopback port
//! gets the same HTML page (shared by `tests/it` and `benches/contexts`).

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An HTTP server on 127.0.0.1:0 answering every request with `page`;
/// returns its URL.
pub async fn serve_html(page: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/")
}
