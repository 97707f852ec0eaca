//! Debian's Chromium, headless, driven over its DevTools protocol on a pipe (no WebDriver, no
//! network port): what the tests of ibi's status pages read the DOM with.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic is how a test fails

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// Seconds a browser run may take before `timeout` ends it.
pub const BROWSER_TIMEOUT: &str = "120";

/// Chromium with its DevTools protocol on a pipe (`--remote-debugging-pipe`: it reads commands on
/// fd 3 and writes answers on fd 4, each JSON ending in NUL), one page target attached.
pub struct Browser {
    /// The protocol's events not yet looked at.
    pub events: Vec<Value>,
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    id: u64,
    session: String,
}

impl Browser {
    /// Chromium with `flags`, its profile in `profile`, ended by `timeout` after `seconds`.
    pub fn start(profile: &Path, flags: &[&str], seconds: &str) -> Browser {
        let mut child = Command::new("timeout")
            .args([
                seconds,
                "sh",
                "-c",
                // fd 3 and 4 are the pipe's ends; chromium's own output goes nowhere.
                r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null 2>&1"#,
                "chromium",
                "--headless=new",
                "--disable-gpu",
                "--no-sandbox",
                "--remote-debugging-pipe",
                &format!("--user-data-dir={}", profile.display()),
            ])
            .args(flags)
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let from = BufReader::new(child.stdout.take().unwrap());
        let mut b = Browser {
            child,
            to,
            from,
            id: 0,
            events: Vec::new(),
            session: String::new(),
        };
        let target = b.call(false, "Target.createTarget", json!({"url": "about:blank"}));
        let attached = b.call(
            false,
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        b.call(true, "Page.enable", json!({}));
        b
    }

    fn read(&mut self) -> Value {
        let mut msg = Vec::new();
        self.from.read_until(0, &mut msg).unwrap();
        assert_eq!(
            msg.pop(),
            Some(0),
            "chromium closed its DevTools pipe (crashed, or ran out of time)"
        );
        serde_json::from_slice(&msg).unwrap()
    }

    /// `method` on the browser, or on the attached page; its result.
    pub fn call(&mut self, on_page: bool, method: &str, params: Value) -> Value {
        self.id += 1;
        let mut msg = json!({"id": self.id, "method": method, "params": params});
        if on_page {
            msg["sessionId"] = self.session.clone().into();
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        self.to.flush().unwrap();
        loop {
            let m = self.read();
            if m["id"] == self.id {
                assert!(m.get("error").is_none(), "{method}: {m}");
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    /// Loads `url` in the page; the document's root node once its load event fired.
    pub fn load(&mut self, url: &str) -> Value {
        self.events.clear();
        self.call(true, "Page.navigate", json!({ "url": url }));
        loop {
            let fired = self
                .events
                .iter()
                .position(|e| e["method"] == "Page.loadEventFired");
            match fired {
                Some(i) => {
                    self.events.remove(i);
                    let doc = self.call(true, "DOM.getDocument", json!({"depth": -1}));
                    // A load event of the page before (about:blank) does not count.
                    if doc["root"]["documentURL"] == url {
                        return doc["root"]["nodeId"].clone();
                    }
                }
                None => {
                    let m = self.read();
                    self.events.push(m);
                }
            }
        }
    }

    pub fn count(&mut self, root: &Value, selector: &str) -> usize {
        let found = self.call(
            true,
            "DOM.querySelectorAll",
            json!({"nodeId": root, "selector": selector}),
        );
        found["nodeIds"].as_array().unwrap().len()
    }

    pub fn outer_html(&mut self, root: &Value) -> String {
        let html = self.call(true, "DOM.getOuterHTML", json!({ "nodeId": root }));
        html["outerHTML"].as_str().unwrap().to_string()
    }

    /// `expression` run in the page (the test's script, not the page's); its value.
    pub fn evaluate(&mut self, expression: &str) -> Value {
        let r = self.call(
            true,
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    pub fn close(mut self) {
        self.call(false, "Browser.close", json!({}));
        assert!(self.child.wait().unwrap().success());
    }
}

/// A test that failed before [`Browser::close`] leaves no browser behind: `timeout` is asked to end
/// it (SIGTERM, which `timeout` passes on to chromium), then reaped.
impl Drop for Browser {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let _ = self.child.wait();
        }
    }
}
