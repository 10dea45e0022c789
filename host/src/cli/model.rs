//! The command line's model options: `review --provider ID [--model M] ...` (the model stage of
//! a local review) and `chat` (a conversation with a provider, optionally with the repository
//! tools). Both run the same library code as the daemon (`review::model`, `chat`), on a
//! runtime built here.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::ValueEnum;
use review_agent_gateway::GatewayError;
use review_agent_gateway::chat::{ChatOptions, ChatRepository};
use review_agent_gateway::config::Config;
use review_agent_gateway::conversation::Budget;
use review_agent_gateway::error::codes;
use review_agent_gateway::protocol::{
    AgentEvent, ChatMessage, ChatRole, Effort, EventPayload, SelectionContext,
};
use review_agent_gateway::review::RunControl;
use review_agent_gateway::review::model::ModelReview;

/// `review`'s model options (DESIGN §8). Without `--provider` the review runs the rules only.
#[derive(clap::Args, Debug, Clone)]
pub struct ReviewModelArgs {
    /// Also review with this model provider (a `[[providers]]` id of the config; `builtin`:
    /// rules only). The model's findings are checked against the diff and its evidence.
    #[arg(long)]
    pub provider: Option<String>,
    /// The model (default: the provider's `model`).
    #[arg(long, requires = "provider")]
    pub model: Option<String>,
    /// The config file with the providers (default: config.toml in the config dir).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// How much model work to spend: quick (no repository tools), balanced, thorough.
    #[arg(long, value_enum, default_value = "balanced", requires = "provider")]
    pub effort: EffortArg,
    /// BCP 47 language of the model's finding text, e.g. `de` or `zh-CN` (default English).
    #[arg(long, requires = "provider")]
    pub language: Option<String>,
    /// Budget: most repository tool calls of the model (default and cap: `[limits]`).
    #[arg(long, requires = "provider")]
    pub max_tool_calls: Option<u32>,
    /// Budget: most model output tokens over the review.
    #[arg(long, requires = "provider")]
    pub max_output_tokens: Option<u32>,
    /// Budget: most tokens of one model request (capped by the provider's context_window).
    #[arg(long, requires = "provider")]
    pub max_context_tokens: Option<u64>,
}

/// `--effort`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum EffortArg {
    /// Only `report_finding`; clear, high-impact problems.
    Quick,
    /// Repository tools offered; the default.
    Balanced,
    /// Follow callers and callees.
    Thorough,
}

impl From<EffortArg> for Effort {
    fn from(arg: EffortArg) -> Effort {
        match arg {
            EffortArg::Quick => Effort::Quick,
            EffortArg::Balanced => Effort::Balanced,
            EffortArg::Thorough => Effort::Thorough,
        }
    }
}

/// A multi-thread runtime for the model's streams (the review blocks on it from the main
/// thread, outside the runtime).
pub fn runtime() -> Result<tokio::runtime::Runtime, GatewayError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            GatewayError::new(
                codes::INTERNAL,
                format!("cannot start the async runtime: {e}"),
                "Report this bug.",
            )
        })
}

/// The model stage of a `review` with `--provider`, or `None` for `builtin`.
///
/// # Errors
/// `config.*` for the config file; `provider.not_configured` and `secrets.*` as
/// [`review_agent_gateway::providers::select`].
pub fn review_model(
    args: &ReviewModelArgs,
    runtime: &tokio::runtime::Runtime,
) -> Result<Option<ModelReview>, GatewayError> {
    let Some(provider_id) = args.provider.as_deref() else {
        return Ok(None);
    };
    if let Some(language) = &args.language {
        review_agent_gateway::review::model::check_language(
            language,
            review_agent_gateway::error::Surface::CommandLine,
        )?;
    }
    let loaded = Config::load(args.config.as_deref())?;
    let config = loaded.config();
    let Some((provider, model)) = review_agent_gateway::providers::select(
        config,
        Some(provider_id),
        args.model.as_deref(),
        None,
        review_agent_gateway::error::Surface::CommandLine,
    )?
    else {
        return Ok(None);
    };
    Ok(Some(ModelReview {
        budget: Budget::within(
            &config.limits,
            args.max_tool_calls,
            args.max_output_tokens,
            args.max_context_tokens,
            provider.as_ref(),
        ),
        provider,
        model,
        language: args.language.clone(),
        effort: args.effort.into(),
        runtime: runtime.handle().clone(),
        symbols: None,
    }))
}

/// `review-agent-gateway chat`.
#[derive(clap::Args, Debug)]
pub struct ChatArgs {
    /// The question (Markdown). Several words are joined with spaces.
    #[arg(required = true)]
    pub message: Vec<String>,
    /// The provider (a `[[providers]]` id; default: the config's `default_provider`).
    #[arg(long)]
    pub provider: Option<String>,
    /// The model (default: the provider's `model`).
    #[arg(long)]
    pub model: Option<String>,
    /// The config file (default: config.toml in the config dir).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Let the model read this repository with the read-only tools (file_read, code_search,
    /// symbol_search, ...).
    #[arg(long)]
    pub repo: Option<PathBuf>,
    /// The revision the tools and `--file` read (default HEAD).
    #[arg(long = "ref", requires = "repo", allow_hyphen_values = true)]
    pub rev: Option<String>,
    /// A file of `--repo` to ask about: its lines (`--lines`) go with the question.
    #[arg(long, requires = "repo")]
    pub file: Option<String>,
    /// The lines of `--file`, `START-END` (1-based, inclusive), or one line `N`.
    #[arg(long, requires = "file")]
    pub lines: Option<String>,
    /// Budget: most tool calls (default and cap: `[limits]`).
    #[arg(long)]
    pub max_tool_calls: Option<u32>,
    /// `text`: the answer as it streams, tool calls on stderr; `json`: the AgentEvents, one
    /// per line.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ChatFormat,
}

/// `chat --format`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ChatFormat {
    /// The answer text.
    Text,
    /// AgentEvents, one JSON object a line.
    Json,
}

/// Run `chat`: exit 0 when the model answered, 2 on an error (printed as the other commands
/// do).
pub fn chat_command(args: ChatArgs, fail: fn(&GatewayError) -> ExitCode) -> ExitCode {
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&error),
    };
    let options = match chat_options(&args, &runtime) {
        Ok(options) => options,
        Err(error) => return fail(&error),
    };
    let control = RunControl::new(review_agent_gateway::review::new_id("run"));
    let mut stdout = std::io::stdout().lock();
    let mut sink = |event: &AgentEvent| {
        let _ = match args.format {
            ChatFormat::Json => serde_json::to_string(event)
                .map_err(std::io::Error::other)
                .and_then(|line| writeln!(stdout, "{line}")),
            ChatFormat::Text => match &event.payload {
                EventPayload::TextDelta(delta) => write!(stdout, "{}", delta.text),
                EventPayload::ToolStarted(tool) => {
                    eprintln!("[{} {}]", tool.tool, tool.input);
                    Ok(())
                }
                EventPayload::Warning(warning) => {
                    eprintln!("warning[{}]: {}", warning.code, warning.message);
                    Ok(())
                }
                EventPayload::RunCompleted(_) => writeln!(stdout),
                _ => Ok(()),
            },
        };
        let _ = stdout.flush();
    };
    let result = review_agent_gateway::chat::run_with(&options, &control, &mut sink);
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

fn chat_options(
    args: &ChatArgs,
    runtime: &tokio::runtime::Runtime,
) -> Result<ChatOptions, GatewayError> {
    let loaded = Config::load(args.config.as_deref())?;
    let config = loaded.config();
    let (provider, model) = review_agent_gateway::providers::select(
        config,
        args.provider.as_deref(),
        args.model.as_deref(),
        None,
        review_agent_gateway::error::Surface::CommandLine,
    )?
    .ok_or_else(|| {
        let message = if args.provider.as_deref() == Some("builtin") {
            "`builtin` runs the review rules only and cannot chat; chat needs a model provider"
        } else {
            "chat needs a model provider: give --provider, or set `default_provider` in the config"
        };
        GatewayError::new(
            codes::PROVIDER_NOT_CONFIGURED,
            message,
            "Give --provider with the id of a [[providers]] entry (`review-agent-gateway \
             providers list` shows them).",
        )
    })?;
    let mut tools = None;
    let mut selection = None;
    if let Some(repo) = &args.repo {
        let rev = args.rev.clone().unwrap_or_else(|| "HEAD".into());
        let ctx = review_agent_gateway::tools::ToolContext::open(repo, Some(&rev))?;
        if let Some(file) = &args.file {
            selection = Some(read_selection(&ctx, file, args.lines.as_deref())?);
        }
        tools = Some(ChatRepository {
            path: repo.clone(),
            rev,
            symbols: Arc::new(review_agent_gateway::tools::SymbolIndex::open_default()),
        });
    }
    Ok(ChatOptions {
        budget: Budget::within(
            &config.limits,
            args.max_tool_calls,
            None,
            None,
            provider.as_ref(),
        ),
        provider,
        model,
        messages: vec![ChatMessage {
            role: ChatRole::User,
            content: args.message.join(" "),
        }],
        selection,
        tools,
        runtime: runtime.handle().clone(),
        request_id: None,
        surface: review_agent_gateway::error::Surface::CommandLine,
    })
}

/// The `--file`/`--lines` selection, read with `file_read` at the context's revision.
fn read_selection(
    ctx: &review_agent_gateway::tools::ToolContext,
    file: &str,
    lines: Option<&str>,
) -> Result<SelectionContext, GatewayError> {
    use review_agent_gateway::tools::{FileRead, GatewayTool};
    let bad_lines = || {
        GatewayError::new(
            codes::REQUEST_INVALID,
            format!(
                "--lines `{}` is not START-END or N",
                lines.unwrap_or_default()
            ),
            "Give 1-based lines, e.g. --lines 40-57 or --lines 12.",
        )
    };
    let (start, end) = match lines {
        None => (1, u32::MAX),
        Some(spec) => {
            let (a, b) = spec.split_once('-').unwrap_or((spec, spec));
            let start: u32 = a.trim().parse().map_err(|_| bad_lines())?;
            let end: u32 = b.trim().parse().map_err(|_| bad_lines())?;
            if start == 0 || end < start {
                return Err(GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!("--lines `{spec}`: lines are numbered from 1, and START comes first"),
                    "Give 1-based lines, e.g. --lines 40-57 or --lines 12.",
                ));
            }
            (start, end)
        }
    };
    let mut input = serde_json::json!({"path": file, "startLine": start});
    if end != u32::MAX {
        input["endLine"] = end.into();
    }
    let output = FileRead
        .execute(ctx, input)
        .map_err(
            |error| match error.message.find("past the end of the file") {
                // file_read's words are about its input fields; here they came from --lines.
                Some(at) => GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!("--lines: line {start} is {}", &error.message[at..]),
                    "Give lines that exist in --file (its length is in the message).",
                ),
                None => error,
            },
        )?
        .value;
    let text = output["text"].as_str().unwrap_or_default().to_owned();
    let last = output["endLine"].as_u64().map_or(end, |e| e as u32);
    Ok(SelectionContext {
        gitlab_origin: String::new(),
        project_path: String::new(),
        merge_request_iid: None,
        file_path: file.to_owned(),
        start_line: start,
        end_line: last,
        text,
        head_sha: None,
    })
}
