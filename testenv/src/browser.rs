//! Real browsers for the dashboard's tests, driven over WebDriver: headless Chromium
//! (`chromium` + `chromedriver`, Debian packages) and headless Firefox (`firefox-esr` from
//! Debian + `geckodriver` from crates.io). [`start`] says loudly why a browser is missing.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use fantoccini::Locator;
pub use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder};
use serde_json::json;

use crate::{eventually, free_port, skip};

/// Which browser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Chromium,
    Firefox,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Chromium => "chromium",
            Kind::Firefox => "firefox",
        }
    }

    /// The browser binary and its WebDriver, and how to install them.
    fn programs(self) -> ([&'static str; 2], &'static str) {
        match self {
            Kind::Chromium => (["chromium", "chromedriver"], "apt-get install chromium chromium-driver; .ci/run does"),
            Kind::Firefox => {
                (["firefox-esr", "geckodriver"], "apt-get install firefox-esr and cargo install geckodriver --locked; .ci/run does")
            }
        }
    }
}

/// A child process killed on drop.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A WebDriver and the browser it started, in a process group of their own: killed together
/// on drop, so a failed test leaves no browser behind.
struct DriverGroup(Child);

impl Drop for DriverGroup {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.0.wait();
    }
}

/// A browser session, its WebDriver, and the profile folder; everything ends on drop.
pub struct Browser {
    pub client: Client,
    pub kind: Kind,
    _driver: DriverGroup,
    _profile: tempfile::TempDir,
}

impl std::ops::Deref for Browser {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

/// Starts `kind` headless (accepting self-signed certificates: the tests serve their own), or
/// says why it cannot and returns `None`.
pub async fn start(kind: Kind) -> Option<Browser> {
    let (programs, install) = kind.programs();
    for bin in programs {
        if Command::new(bin).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            skip(&format!("{bin} not found ({install})"));
            return None;
        }
    }
    let port = free_port();
    let profile = tempfile::tempdir().unwrap();
    let mut driver = match kind {
        Kind::Chromium => Command::new("chromedriver"),
        Kind::Firefox => Command::new("geckodriver"),
    };
    match kind {
        Kind::Chromium => driver.arg(format!("--port={port}")),
        // Firefox inherits this: without it, a release build looks up its remote-settings host
        // at every start (the pref that points it elsewhere is ignored).
        Kind::Firefox => driver
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("HOME", profile.path())
            .env("MOZ_REMOTE_SETTINGS_DEVTOOLS", "1"),
    };
    use std::os::unix::process::CommandExt;
    let driver = DriverGroup(driver.process_group(0).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let mut caps = serde_json::Map::new();
    caps.insert("acceptInsecureCerts".into(), json!(true));
    match kind {
        Kind::Chromium => caps.insert(
            "goog:chromeOptions".into(),
            json!({"binary": "/usr/bin/chromium", "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--window-size=1280,1700", format!("--user-data-dir={}", profile.path().display())]}),
        ),
        Kind::Firefox => caps.insert(
            "moz:firefoxOptions".into(),
            json!({"binary": "/usr/bin/firefox-esr", "args": ["-headless", "--width=1280", "--height=1700"], "prefs": {
                "app.update.disabledForTesting": true,
                "browser.shell.checkDefaultBrowser": false,
                "datareporting.policy.dataSubmissionEnabled": false,
                "network.captive-portal-service.enabled": false,
                "network.connectivity-service.enabled": false,
                "extensions.update.enabled": false,
                "browser.safebrowsing.malware.enabled": false,
                "browser.safebrowsing.phishing.enabled": false,
                "browser.safebrowsing.downloads.enabled": false,
                "toolkit.telemetry.enabled": false,
                "services.settings.server": "http://127.0.0.1:1/v1"
            }}),
        ),
    };
    let url = format!("http://127.0.0.1:{port}");
    let client = eventually(&format!("{} answering", kind.programs().0[1]), || async {
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new()).capabilities(caps.clone()).connect(&url).await.ok()
    })
    .await;
    Some(Browser { client, kind, _driver: driver, _profile: profile })
}

/// How long one navigation may take before [`Browser::open`] tries again in a fresh tab.
const PAGE_LOAD: Duration = Duration::from_secs(45);

impl Browser {
    /// Navigates to `url`. A navigation whose renderer never answers (Chromium's "Timed out
    /// receiving message from renderer", met on a loaded 2-core machine) is tried again in a
    /// new tab, with a new renderer, up to three times; the errors are printed, and a test
    /// fails only when every attempt did.
    pub async fn open(&self, url: &str) {
        use fantoccini::wd::TimeoutConfiguration;
        self.client.update_timeouts(TimeoutConfiguration::new(None, Some(PAGE_LOAD), None)).await.unwrap();
        let mut errors = Vec::new();
        for attempt in 1..=3 {
            match self.client.goto(url).await {
                Ok(()) => return,
                Err(e) => {
                    eprintln!("{}: navigation {attempt} to {url} failed: {e}", self.kind.name());
                    errors.push(e.to_string());
                }
            }
            if let Ok(tab) = self.client.new_window(true).await {
                let _ = self.client.switch_to_window(tab.handle).await;
            }
        }
        panic!("{}: {url} never loaded: {errors:?}", self.kind.name());
    }

    /// Clicks the element `css`. A live page may swap the section it is in between finding it
    /// and clicking it (a watched object changed): found again and clicked, for 30 s at most.
    pub async fn click(&self, css: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let tried = match self.client.find(Locator::Css(css)).await {
                Ok(el) => el.click().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match tried {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("{}: could not click {css}: {e}", self.kind.name()),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

/// Where a test's screenshots go: `target/dashboard-screenshots/` for Chromium (the set the
/// README shows), a `firefox/` folder inside it for Firefox.
pub fn screenshots(kind: Kind) -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/dashboard-screenshots");
    if kind == Kind::Firefox {
        dir = dir.join("firefox");
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Saves a screenshot named `name`.
pub async fn shot(b: &Browser, name: &str) {
    let png = b.screenshot().await.unwrap();
    std::fs::write(screenshots(b.kind).join(format!("{name}.png")), png).unwrap();
}

/// The text of the element `css`, once `pred` holds for it (30 s at most; a screenshot of
/// the page when it never does).
pub async fn text_where(b: &Browser, css: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(el) = b.find(Locator::Css(css)).await
            && let Ok(text) = el.text().await
            && pred(&text)
        {
            return text;
        }
        if Instant::now() > deadline {
            shot(b, &format!("failed-{}", what.replace(' ', "-"))).await;
            let page = b.source().await.unwrap_or_default();
            panic!("{}: timed out waiting for {what}; the page:\n{page}", b.kind.name());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
