//! A socket's requests, in order: the token checked first, then `POST`
//! (a client message: `initialize` answered at once with the connection's
//! id, others accepted with 202), `GET` (a connection's or a session's SSE
//! stream, or the WebSocket upgrade) and `DELETE` (the connection ends).

use super::conn::{session_of, Conn, Item, Next, Refusal, Stream};
use super::http::{self, Request};
use super::hub::Hub;
use super::ws;
use serde_json::{json, Value};
use std::io::{self, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

const CONNECTION_HEADER: &str = "acp-connection-id";
const SESSION_HEADER: &str = "acp-session-id";

/// The methods whose POST must name their session in `Acp-Session-Id`.
const SESSION_SCOPED: &[&str] = &[
    "session/prompt",
    "session/cancel",
    "session/set_mode",
    "session/set_model",
    "session/set_config_option",
    "session/close",
];

/// A socket, plain or TLS.
enum Socket {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Plain(s) => s.read(buf),
            Socket::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Plain(s) => s.write(buf),
            Socket::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Socket::Plain(s) => s.flush(),
            Socket::Tls(s) => s.flush(),
        }
    }
}

type Halves = (Box<dyn Read + Send>, Box<dyn Write + Send>);

impl Socket {
    fn tcp(&self) -> &TcpStream {
        match self {
            Socket::Plain(s) => s,
            Socket::Tls(s) => &s.sock,
        }
    }

    fn halves(self) -> io::Result<Halves> {
        match self {
            Socket::Plain(s) => Ok((Box::new(s.try_clone()?), Box::new(s))),
            Socket::Tls(s) => {
                let (read, write) = super::tls::split(*s)?;
                Ok((Box::new(read), Box::new(write)))
            }
        }
    }
}

/// Serves one socket's requests until it closes, or one of them takes it
/// over (a stream, a WebSocket).
pub(crate) fn serve_socket(
    hub: &Arc<Hub>,
    stream: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let socket = match tls {
        None => Socket::Plain(stream),
        Some(config) => match rustls::ServerConnection::new(config) {
            Ok(conn) => Socket::Tls(Box::new(rustls::StreamOwned::new(conn, stream))),
            Err(_) => return,
        },
    };
    let mut input = BufReader::with_capacity(8 * 1024, socket);
    loop {
        let mut request = match http::read_head_of(&mut input, &hub.caps.http) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(error) => return refuse(&mut input, &error),
        };
        // Nothing past the head is read before the token is checked: a
        // refused request's body is left unread, and its socket closed.
        if let Err(answer) = gate(hub, &request) {
            let close = request.close || answer.status >= 400 || http::has_body(&request);
            if respond(&mut input, &answer, close).is_err() || close {
                return;
            }
            continue;
        }
        request.body = match http::read_body(&mut input, &request, &hub.caps.http) {
            Ok(body) => body,
            Err(error) => return refuse(&mut input, &error),
        };
        let close = request.close;
        match handle(hub, request, input) {
            Some(kept) if !close => input = kept,
            _ => return,
        }
    }
}

/// Answers a request that could not be read, if it deserves an answer.
fn refuse(input: &mut BufReader<Socket>, error: &http::ReadError) {
    if let Some((status, why)) = error.answer() {
        let _ = http::respond_error(input.get_mut(), status, why, &[], true);
    }
}

/// An answer to a request that does not take the socket over.
struct Answer {
    status: u16,
    body: Vec<u8>,
    headers: Vec<(&'static str, String)>,
    json: bool,
}

impl Answer {
    fn error(status: u16, why: impl Into<String>) -> Answer {
        Answer {
            status,
            body: json!({ "error": why.into() }).to_string().into_bytes(),
            headers: Vec::new(),
            json: true,
        }
    }

    fn empty(status: u16) -> Answer {
        Answer {
            status,
            body: Vec::new(),
            headers: Vec::new(),
            json: false,
        }
    }

    fn with(mut self, name: &'static str, value: impl Into<String>) -> Answer {
        self.headers.push((name, value.into()));
        self
    }
}

/// Handles one request: the socket back when it stays for the next.
fn handle(
    hub: &Arc<Hub>,
    request: Request,
    mut input: BufReader<Socket>,
) -> Option<BufReader<Socket>> {
    let answer = match request.method.as_str() {
        "POST" => post(hub, &request),
        "DELETE" => delete(hub, &request),
        "GET" if wants_websocket(&request) => {
            websocket(hub, &request, input);
            return None;
        }
        "GET" => match open_stream(hub, &request) {
            Ok((conn, stream)) => {
                sse(hub, &conn, &stream, input.into_inner());
                return None;
            }
            Err(answer) => answer,
        },
        _ => {
            Answer::error(405, "/acp takes POST, GET and DELETE").with("Allow", "POST, GET, DELETE")
        }
    };
    let close = request.close || answer.status >= 400 && answer.status != 404;
    respond(&mut input, &answer, close).ok()?;
    (!close).then_some(input)
}

/// Writes `answer`; `close` says the socket ends after it.
fn respond(input: &mut BufReader<Socket>, answer: &Answer, close: bool) -> io::Result<()> {
    let headers: Vec<(&str, &str)> = answer
        .headers
        .iter()
        .map(|(n, v)| (*n, v.as_str()))
        .collect();
    let kind = answer.json.then_some("application/json");
    http::respond(
        input.get_mut(),
        answer.status,
        &headers,
        kind,
        &answer.body,
        close,
    )
}

/// What every request passes before anything of it is read further: the
/// path, a browser's origin, the token, the server still taking work.
fn gate(hub: &Hub, request: &Request) -> Result<(), Answer> {
    if request.path == "/healthz" && request.method == "GET" {
        return Err(Answer {
            status: 200,
            body: b"ok\n".to_vec(),
            headers: Vec::new(),
            json: false,
        });
    }
    if request.path != "/acp" {
        return Err(Answer::error(404, "the ACP endpoint is /acp"));
    }
    if let Some(origin) = request.headers.iter().find(|(n, _)| n == "origin") {
        if !hub
            .origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(&origin.1))
        {
            return Err(Answer::error(
                403,
                "requests from web pages of other origins are refused",
            ));
        }
    }
    if !super::token::authorized(request.header("authorization"), &hub.token) {
        return Err(Answer::error(
            401,
            "a valid 'Authorization: Bearer <token>' header is required",
        )
        .with("WWW-Authenticate", "Bearer"));
    }
    if hub.draining() {
        return Err(Answer::error(503, "the server is stopping").with("Retry-After", "5"));
    }
    Ok(())
}

/// Parses a client message: one JSON-RPC object.
fn parse_message(bytes: &[u8]) -> Result<Value, (u16, &'static str)> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|_| (400, "the body is not one JSON value"))?;
    match value {
        Value::Array(_) => Err((501, "batches are not supported: send one message at a time")),
        Value::Object(_) => Ok(value),
        _ => Err((400, "a JSON-RPC message is an object")),
    }
}

fn is_initialize(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("initialize")
        && message.get("id").is_some()
}

/// Whether `message` may reach connection `conn`'s agent, with the session
/// the transport named (`header`): a session-scoped method names one of
/// the connection's sessions; a load names one no other live connection
/// has open.
fn admit(
    hub: &Hub,
    conn: &Conn,
    message: &Value,
    header: Option<&str>,
) -> Result<(), (u16, String)> {
    let method = message.get("method").and_then(Value::as_str);
    let named = session_of(message);
    if let (Some(header), Some(named)) = (header, named) {
        if header != named {
            return Err((
                400,
                "Acp-Session-Id names another session than the message".into(),
            ));
        }
    }
    let loading = matches!(method, Some("session/load" | "session/resume"));
    // A load names the session it opens (the TypeScript SDK puts it in
    // the header too); anything else names one the connection has.
    if let Some(header) = header.filter(|_| !loading) {
        if !conn.has_session(header) {
            return Err((404, "unknown session id on this connection".into()));
        }
    }
    if method.is_some_and(|m| SESSION_SCOPED.contains(&m)) {
        let Some(session) = header.or(named) else {
            return Err((400, "this method needs its session (Acp-Session-Id)".into()));
        };
        if !conn.has_session(session) {
            return Err((404, "unknown session id on this connection".into()));
        }
    }
    if loading {
        if let Some(session) = named {
            if hub.reserve(session, &conn.id).is_err() {
                return Err((
                    409,
                    "the session is open on another connection: close it there first".into(),
                ));
            }
        }
    }
    Ok(())
}

fn post(hub: &Arc<Hub>, request: &Request) -> Answer {
    let json = request
        .header("content-type")
        .is_some_and(|kind| kind.to_ascii_lowercase().starts_with("application/json"));
    if !json {
        return Answer::error(415, "Content-Type must be application/json");
    }
    let message = match parse_message(&request.body) {
        Ok(message) => message,
        Err((status, why)) => return Answer::error(status, why),
    };
    let connection = request.header(CONNECTION_HEADER);
    if connection.is_none() && is_initialize(&message) {
        return initialize(hub, &message);
    }
    let Some(connection) = connection else {
        return Answer::error(400, "Acp-Connection-Id is missing (initialize first)");
    };
    let Some(conn) = hub.conn(connection) else {
        return Answer::error(404, "unknown connection id");
    };
    if !conn.allow() {
        return Answer::error(429, "too many requests").with("Retry-After", "1");
    }
    if let Err((status, why)) = admit(hub, &conn, &message, request.header(SESSION_HEADER)) {
        return Answer::error(status, why);
    }
    match conn.deliver(&message) {
        Ok(()) => Answer::empty(202),
        Err(Refusal::Closed) => Answer::error(404, "the connection has ended"),
        Err(Refusal::Busy) => {
            Answer::error(429, "too many messages waiting").with("Retry-After", "1")
        }
    }
}

fn initialize(hub: &Arc<Hub>, message: &Value) -> Answer {
    let Some(conn) = hub.open(false) else {
        return Answer::error(503, "too many connections; try again later")
            .with("Retry-After", "5");
    };
    match conn.initialize(message, hub.caps.initialize) {
        Some(answer) => Answer {
            status: 200,
            body: answer,
            headers: vec![("Acp-Connection-Id", conn.id.clone())],
            json: true,
        },
        None => {
            conn.close();
            Answer::error(504, "the agent did not answer initialize in time")
        }
    }
}

fn delete(hub: &Hub, request: &Request) -> Answer {
    let Some(connection) = request.header(CONNECTION_HEADER) else {
        return Answer::error(400, "Acp-Connection-Id is missing");
    };
    let Some(conn) = hub.conn(connection) else {
        return Answer::error(404, "unknown connection id");
    };
    conn.close();
    Answer::empty(202)
}

/// The stream a GET asks for, checked.
fn open_stream(hub: &Hub, request: &Request) -> Result<(Arc<Conn>, Stream), Answer> {
    if let Some(accept) = request.header("accept") {
        let accept = accept.to_ascii_lowercase();
        if !accept.contains("text/event-stream") && !accept.contains("*/*") {
            return Err(Answer::error(406, "GET /acp serves text/event-stream"));
        }
    }
    let Some(connection) = request.header(CONNECTION_HEADER) else {
        return Err(Answer::error(400, "Acp-Connection-Id is missing"));
    };
    let conn = hub
        .conn(connection)
        .ok_or_else(|| Answer::error(404, "unknown connection id"))?;
    let stream = match request.header(SESSION_HEADER) {
        Some(session) if conn.has_session(session) => Stream::Session(session.to_string()),
        // A stream for a session a load is about to open here (the
        // TypeScript SDK opens it before it sends the load): it carries
        // nothing until the load is answered.
        Some(session) if hub.held_elsewhere(session, &conn.id) => {
            return Err(Answer::error(
                409,
                "the session is open on another connection: close it there first",
            ))
        }
        Some(session) if conn.expect_session(session) => Stream::Session(session.to_string()),
        Some(_) => {
            return Err(Answer::error(
                429,
                "too many streams wait for a session load on this connection",
            ))
        }
        None => Stream::Connection,
    };
    Ok((conn, stream))
}

/// Writes a stream's messages as SSE events until it is over, the socket
/// fails, or another GET takes the stream over.
fn sse(hub: &Hub, conn: &Conn, stream: &Stream, mut socket: Socket) {
    let Some(number) = conn.attach(stream) else {
        return;
    };
    if http::respond_stream_head(&mut socket, "text/event-stream").is_err() {
        conn.detach(stream, number);
        return;
    }
    loop {
        let written = match conn.next(stream, number, hub.caps.keepalive) {
            Next::Over => break,
            Next::Idle => socket
                .write_all(b": keepalive\n\n")
                .and_then(|()| socket.flush()),
            Next::Item(Item::Frame(..)) => Ok(()),
            Next::Item(Item::Message(line)) => {
                let mut event = Vec::with_capacity(line.len() + 8);
                event.extend_from_slice(b"data: ");
                event.extend_from_slice(&line);
                event.extend_from_slice(b"\n\n");
                match socket.write_all(&event).and_then(|()| socket.flush()) {
                    Ok(()) => Ok(()),
                    Err(error) => {
                        conn.unread(stream, Item::Message(line));
                        Err(error)
                    }
                }
            }
        };
        if written.is_err() {
            break;
        }
    }
    conn.detach(stream, number);
    let _ = socket.tcp().shutdown(std::net::Shutdown::Both);
}

fn wants_websocket(request: &Request) -> bool {
    request
        .header("upgrade")
        .is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
}

/// The WebSocket upgrade, then the socket's messages both ways: frames
/// read here, the connection's stream written by a thread of its own.
fn websocket(hub: &Arc<Hub>, request: &Request, mut input: BufReader<Socket>) {
    let upgrade = request.header("connection").is_some_and(|c| {
        c.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
    });
    let key = request
        .header("sec-websocket-key")
        .filter(|k| ws::key_is_valid(k));
    let refuse = |input: &mut BufReader<Socket>, status, why: &str, extra: &[(&str, &str)]| {
        let _ = http::respond_error(input.get_mut(), status, why, extra, true);
    };
    let (true, Some(key)) = (upgrade, key) else {
        return refuse(&mut input, 400, "a malformed WebSocket upgrade", &[]);
    };
    if request.header("sec-websocket-version") != Some("13") {
        return refuse(
            &mut input,
            426,
            "WebSocket version 13 only",
            &[("Sec-WebSocket-Version", "13")],
        );
    }
    let Some(conn) = hub.open(true) else {
        return refuse(
            &mut input,
            503,
            "too many connections; try again later",
            &[("Retry-After", "5")],
        );
    };
    let accept = ws::accept_key(key);
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nAcp-Connection-Id: {}\r\n\r\n",
        conn.id
    );
    if input
        .get_mut()
        .write_all(head.as_bytes())
        .and_then(|()| input.get_mut().flush())
        .is_err()
    {
        conn.close();
        return;
    }
    // Frames the client sent right behind its upgrade are kept.
    let early = input.buffer().to_vec();
    let socket = input.into_inner();
    // Nothing at all from the client for this long ends the socket (the
    // writer pings it meanwhile).
    let _ = socket.tcp().set_read_timeout(Some(hub.caps.keepalive * 4));
    let (Ok(tcp), Ok((read, write))) = (socket.tcp().try_clone(), socket.halves()) else {
        conn.close();
        return;
    };
    let writer_conn = conn.clone();
    let keepalive = hub.caps.keepalive;
    let writer = std::thread::Builder::new()
        .name("spindle-ws-writer".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            write_frames(&writer_conn, write, keepalive);
            // The reading half, blocked on the socket, ends with it.
            let _ = tcp.shutdown(std::net::Shutdown::Both);
        });
    if writer.is_err() {
        conn.close();
        return;
    }
    let mut read = io::Cursor::new(early).chain(read);
    read_frames(hub, &conn, &mut read);
    conn.close();
}

fn read_frames(hub: &Hub, conn: &Conn, read: &mut impl Read) {
    let cap = hub.caps.http.body_bytes;
    let mut partial = None;
    loop {
        match ws::read_message(read, &mut partial, cap) {
            Ok(ws::Incoming::Text(text)) => text_message(hub, conn, &text),
            Ok(ws::Incoming::Ping(payload)) => conn.push(Item::Frame(0xA, payload)),
            Ok(ws::Incoming::Pong) => {}
            Ok(ws::Incoming::Close(_)) => {
                conn.push(Item::Frame(0x8, ws::close_payload(ws::NORMAL, "")));
                return;
            }
            Err(ws::FrameError::Refused(code, why)) => {
                conn.push(Item::Frame(0x8, ws::close_payload(code, why)));
                return;
            }
            Err(ws::FrameError::Gone(error)) => {
                log::debug!("connection {}: the WebSocket ended: {error}", conn.id);
                return;
            }
        }
    }
}

/// A JSON-RPC error answer of the server's own, on the socket.
fn rpc_error(id: Option<&Value>, code: i64, message: &str) -> Item {
    let answer = json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message}});
    Item::Message(answer.to_string().into_bytes())
}

fn text_message(hub: &Hub, conn: &Conn, text: &str) {
    let message = match parse_message(text.as_bytes()) {
        Ok(message) => message,
        Err((_, why)) => {
            let code = if serde_json::from_str::<Value>(text).is_err() {
                -32700
            } else {
                -32600
            };
            return conn.push(rpc_error(None, code, why));
        }
    };
    let id = message
        .get("id")
        .filter(|_| message.get("method").is_some());
    if !conn.allow() {
        if id.is_some() {
            conn.push(rpc_error(id, -32000, "too many requests; slow down"));
        }
        return;
    }
    if let Err((_, why)) = admit(hub, conn, &message, None) {
        if id.is_some() {
            conn.push(rpc_error(id, -32602, &why));
        }
        return;
    }
    if let Err(refused) = conn.deliver(&message) {
        let why = match refused {
            Refusal::Closed => "the connection has ended",
            Refusal::Busy => "too many messages waiting; slow down",
        };
        if id.is_some() {
            conn.push(rpc_error(id, -32000, why));
        }
    }
}

fn write_frames(conn: &Conn, out: Box<dyn Write + Send>, keepalive: std::time::Duration) {
    let Some(number) = conn.attach(&Stream::Connection) else {
        return;
    };
    write_attached(conn, out, number, keepalive);
    conn.detach(&Stream::Connection, number);
}

fn write_attached(
    conn: &Conn,
    mut out: Box<dyn Write + Send>,
    number: u64,
    keepalive: std::time::Duration,
) {
    loop {
        let written = match conn.next(&Stream::Connection, number, keepalive) {
            Next::Over => {
                let _ = ws::write_frame(
                    &mut out,
                    0x8,
                    &ws::close_payload(ws::GOING_AWAY, "the agent ended"),
                );
                return;
            }
            Next::Idle => ws::write_frame(&mut out, 0x9, b""),
            Next::Item(Item::Message(line)) => ws::write_frame(&mut out, 0x1, &line),
            Next::Item(Item::Frame(0x8, payload)) => {
                let _ = ws::write_frame(&mut out, 0x8, &payload);
                conn.close();
                // What the agent still says after the close is dropped.
                return;
            }
            Next::Item(Item::Frame(opcode, payload)) => ws::write_frame(&mut out, opcode, &payload),
        };
        if written.is_err() {
            conn.close();
            return;
        }
    }
}
