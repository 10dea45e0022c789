//! Built-in rules over a merge request touching seven languages: exactly the added flagged lines
//! are reported, with every field of the finding as the rule and the line say.

use review_agent_gateway::protocol::{FindingSource, FindingStatus, Side};
use review_agent_gateway::rules::Catalog;

use crate::support::{TestRepo, found, is_fingerprint};

/// `(path, base content or "" when the file is new, head content)`.
///
/// Every flagged line is next to a near miss from the same rule's `no_match` examples; the
/// Python file keeps a flagged line that was already in base (line 5), and the Markdown file
/// holds Python code that no rule for Markdown flags.
pub const FILES: &[(&str, &str, &str)] = &[
    (
        "app/main.py",
        "import os\n\
         import subprocess\n\
         \n\
         legacy = eval(user_input)\n\
         \n\
         \n\
         def run(cmd):\n\
         \x20   return subprocess.run([\"echo\", cmd], check=True)\n",
        "import os\n\
         import subprocess\n\
         import requests\n\
         \n\
         legacy = eval(user_input)\n\
         AWS_KEY = \"AKIAZ3MSJV4WWNKWW5FG\"\n\
         SAMPLE_KEY = \"AKIAIOSFODNN7EXAMPLE\"\n\
         \n\
         \n\
         def run(cmd):\n\
         \x20   return subprocess.run([\"echo\", cmd], check=True)\n\
         \n\
         \n\
         def handler(request, cursor, name, url):\n\
         \x20   result = eval(request.args.get(\"expr\"))\n\
         \x20   value = ast.literal_eval(request.args.get(\"v\"))\n\
         \x20   r = requests.get(url, verify=False)\n\
         \x20   ok = requests.get(url, verify=True)\n\
         \x20   cursor.execute(f\"SELECT * FROM users WHERE name = '{name}'\")\n\
         \x20   cursor.execute(\"SELECT * FROM users WHERE name = %s\", (name,))\n\
         \x20   return result, value, r, ok\n",
    ),
    (
        "web/app.js",
        "export function show(el, text) {\n  el.textContent = text;\n}\n",
        "export function show(el, text) {\n\
         \x20 el.textContent = text;\n\
         }\n\
         \n\
         export function run(userExpression, el, userComment, id) {\n\
         \x20 const result = eval(userExpression);\n\
         \x20 el.innerHTML = userComment;\n\
         \x20 el.textContent = userComment;\n\
         \x20 setTimeout(() => refresh(id), 1000);\n\
         \x20 const evaluation = evaluate(userExpression);\n\
         \x20 return result + evaluation;\n\
         }\n",
    ),
    (
        "web/db.ts",
        "import { db } from \"./db\";\n",
        "import { db } from \"./db\";\n\
         import https from \"https\";\n\
         \n\
         export async function find(req: Request, id: string) {\n\
         \x20 const rows = await db.query(`SELECT * FROM users WHERE id = ${req.params.id}`);\n\
         \x20 const safe = await db.query(\"SELECT * FROM users WHERE id = $1\", [id]);\n\
         \x20 const agent = new https.Agent({ rejectUnauthorized: false });\n\
         \x20 const strict = new https.Agent({ rejectUnauthorized: true });\n\
         \x20 return [rows, safe, agent, strict];\n\
         }\n",
    ),
    (
        "cmd/server/main.go",
        "package main\n\nimport \"os/exec\"\n\nfunc main() {\n}\n",
        "package main\n\
         \n\
         import (\n\
         \t\"crypto/tls\"\n\
         \t\"net/http\"\n\
         \t\"os/exec\"\n\
         )\n\
         \n\
         func run(host, name string) {\n\
         \tcmd := exec.Command(\"sh\", \"-c\", \"ping -c 1 \"+host)\n\
         \tsafe := exec.Command(\"tar\", \"xzf\", name)\n\
         \ttr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}\n\
         \tstrict := &tls.Config{InsecureSkipVerify: false}\n\
         \t_, _, _, _ = cmd, safe, tr, strict\n\
         }\n\
         \n\
         func main() {\n\
         }\n",
    ),
    (
        "src/main/java/App.java",
        "public class App {\n}\n",
        "import java.sql.*;\n\
         \n\
         public class App {\n\
         \x20   void run(Statement stmt, Connection conn, String host, String name) throws Exception {\n\
         \x20       Process p = Runtime.getRuntime().exec(\"ping -c 1 \" + host);\n\
         \x20       ResultSet rs = stmt.executeQuery(\"SELECT * FROM users WHERE name = '\" + name + \"'\");\n\
         \x20       PreparedStatement ps = conn.prepareStatement(\"SELECT * FROM users WHERE name = ?\");\n\
         \x20       Process q = Runtime.getRuntime().exec(new String[]{\"ls\", \"-l\", host});\n\
         \x20   }\n\
         }\n",
    ),
    (
        "src/lib.rs",
        "use std::process::Command;\n",
        "use std::process::Command;\n\
         \n\
         pub fn run(dir: &str) -> Result<(), Box<dyn std::error::Error>> {\n\
         \x20   let client = reqwest::Client::builder().danger_accept_invalid_certs(true).build()?;\n\
         \x20   let out = Command::new(\"sh\").arg(\"-c\").arg(format!(\"ls {}\", dir)).output()?;\n\
         \x20   let safe = Command::new(\"ls\").arg(\"-l\").arg(dir).output()?;\n\
         \x20   let _ = (client, out, safe);\n\
         \x20   Ok(())\n\
         }\n",
    ),
    (
        "app/models/user.rb",
        "class User\nend\n",
        "require \"net/http\"\n\
         \n\
         class User\n\
         \x20 def self.lookup(params, http)\n\
         \x20   User.where(\"email = '#{params[:email]}'\")\n\
         \x20   User.where(\"email = ?\", params[:email])\n\
         \x20   http.verify_mode = OpenSSL::SSL::VERIFY_NONE\n\
         \x20   http.verify_mode = OpenSSL::SSL::VERIFY_PEER\n\
         \x20 end\n\
         end\n",
    ),
    (
        "notes/README.md",
        "",
        "# Notes\n\nNever write `result = eval(request.args.get(\"expr\"))`.\n\
         result = eval(request.args.get(\"expr\"))\n",
    ),
];

/// The findings [`FILES`] must produce: `(ruleId, path, startLine)`.
pub const EXPECTED: &[(&str, &str, u32)] = &[
    ("secrets.aws-access-key-id", "app/main.py", 6),
    ("python.eval-dynamic", "app/main.py", 15),
    ("python.tls-verify-disabled", "app/main.py", 17),
    ("python.sql-injection", "app/main.py", 19),
    ("javascript.code-injection", "web/app.js", 6),
    ("javascript.dom-xss", "web/app.js", 7),
    ("javascript.sql-injection", "web/db.ts", 5),
    ("javascript.tls-reject-unauthorized", "web/db.ts", 7),
    ("go.command-injection", "cmd/server/main.go", 10),
    ("go.tls-insecure-skip-verify", "cmd/server/main.go", 12),
    ("java.command-injection", "src/main/java/App.java", 5),
    ("java.sql-injection", "src/main/java/App.java", 6),
    ("rust.tls-accept-invalid", "src/lib.rs", 4),
    ("rust.command-injection", "src/lib.rs", 5),
    ("ruby.sql-injection", "app/models/user.rb", 5),
    ("ruby.tls-verify-none", "app/models/user.rb", 7),
];

/// A repository with [`FILES`]: base on `main`, head on `feature`; `main` is checked out, so
/// the work tree holds the base and the review must read the head from the object database.
pub fn fixture() -> TestRepo {
    let mut repo = TestRepo::new();
    for (path, base, _) in FILES {
        if !base.is_empty() {
            repo.write(path, base);
        }
    }
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    for (path, _, head) in FILES {
        repo.write(path, head);
    }
    repo.commit("head");
    repo.checkout(&["main"]);
    repo
}

#[test]
fn exactly_the_added_flagged_lines_are_reported() {
    let repo = fixture();
    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    run.assert_code(1);
    assert_eq!(run.found(), found(EXPECTED), "{}", run.describe());
}

#[test]
fn every_finding_carries_its_rule_line_and_fingerprint() {
    let repo = fixture();
    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    let catalog = Catalog::builtin();
    let selection = catalog.select(None).expect("built-in rules select");
    let findings = run.findings();
    assert_eq!(findings.len(), EXPECTED.len(), "{}", run.describe());

    let mut fingerprints = std::collections::HashSet::new();
    for f in &findings {
        let rule_id = f.rule_id.as_deref().expect("rule findings have a ruleId");
        let rule = selection
            .rules()
            .find(|r| r.id() == rule_id)
            .unwrap_or_else(|| panic!("{rule_id} is not a built-in rule"));
        let line = repo.line_at("feature", &f.path, f.start_line);
        let at = format!("{rule_id} at {}:{}", f.path, f.start_line);

        assert_eq!(f.end_line, f.start_line, "{at}");
        assert_eq!(f.side, Side::New, "{at}");
        assert_eq!(f.source, FindingSource::Rule, "{at}");
        assert_eq!(f.status, FindingStatus::Draft, "{at}");
        assert_eq!(f.severity, rule.severity(), "{at}");
        assert_eq!(f.confidence, rule.confidence(), "{at}");
        assert_eq!(f.title, rule.title(), "{at}");
        assert_eq!(f.category, rule.category(), "{at}");
        assert!(
            f.content.starts_with(rule.message().trim_end()),
            "{at}: {}",
            f.content
        );
        assert!(f.id.starts_with("finding_"), "{at}: id {}", f.id);
        assert_eq!(f.evidence.len(), 1, "{at}");
        let e = &f.evidence[0];
        assert_eq!(
            (e.path.as_str(), e.start_line, e.end_line),
            (f.path.as_str(), f.start_line, f.start_line),
            "{at}"
        );
        assert_eq!(e.quote, line, "{at}");
        assert_eq!(f.existing_code.as_deref(), Some(line.as_str()), "{at}");
        assert_eq!(f.suggestion_code, rule.fix(&line), "{at}");
        assert!(is_fingerprint(&f.fingerprint), "{at}: {}", f.fingerprint);
        assert!(
            fingerprints.insert(f.fingerprint.clone()),
            "{at}: repeated fingerprint"
        );
    }
}

#[test]
fn the_same_head_gives_the_same_fingerprints_on_every_run() {
    let repo = fixture();
    let args = ["--base", "main", "--head", "feature", "--format", "json"];
    let fps = |run: &crate::support::Run| {
        let mut v: Vec<(String, String)> = run
            .findings()
            .into_iter()
            .map(|f| (f.fingerprint, f.id))
            .collect();
        v.sort();
        v
    };
    let (first, second) = (fps(&repo.review(&args)), fps(&repo.review(&args)));
    assert_eq!(first.len(), EXPECTED.len());
    let only_fp = |v: &[(String, String)]| v.iter().map(|p| p.0.clone()).collect::<Vec<_>>();
    assert_eq!(only_fp(&first), only_fp(&second));
    // Finding ids are per run; fingerprints are not.
    assert!(first.iter().zip(&second).all(|(a, b)| a.1 != b.1));
}
