//! A blocking connection: commands out as RESP multibulk, replies in through the protocol
//! crate's incremental decoder (RESP2 and RESP3).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

use bytes::{Buf, BytesMut};
use latch_protocol::frame::decode;
use latch_protocol::Frame;

use crate::connect::Endpoint;

pub struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    /// Out-of-band RESP3 pushes that arrived while waiting for a reply.
    pub pushes: Vec<Frame>,
}

/// Encodes a command as a RESP multibulk.
fn encode(args: &[Vec<u8>], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

impl Connection {
    /// Connects, then logs in, selects the database and switches protocol, in redis-cli's
    /// order. A refused step is reported on stderr as redis-cli does (`AUTH failed: ...`), and
    /// the session goes on: the command then gets the server's own error.
    pub fn open(endpoint: &Endpoint, resp3: bool) -> io::Result<Connection> {
        let stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port))?;
        stream.set_nodelay(true)?;
        let mut connection = Connection {
            stream,
            buffer: BytesMut::with_capacity(64 * 1024),
            pushes: Vec::new(),
        };
        if let Some(password) = &endpoint.password {
            let mut auth = vec![b"AUTH".to_vec()];
            if let Some(user) = &endpoint.user {
                auth.push(user.as_bytes().to_vec());
            }
            auth.push(password.as_bytes().to_vec());
            connection.step(&auth, "AUTH failed")?;
        }
        if endpoint.db != 0 {
            let select = [b"SELECT".to_vec(), endpoint.db.to_string().into_bytes()];
            connection.step(&select, &format!("SELECT {} failed", endpoint.db))?;
        }
        if resp3 {
            connection.step(&[b"HELLO".to_vec(), b"3".to_vec()], "HELLO 3 failed")?;
        }
        Ok(connection)
    }

    fn step(&mut self, args: &[Vec<u8>], what: &str) -> io::Result<()> {
        if let Frame::Error(text) = self.call(args)? {
            eprintln!("{what}: {}", String::from_utf8_lossy(&text));
        }
        Ok(())
    }

    /// Sends one command and reads its reply (keeping any pushes that come before it).
    pub fn call(&mut self, args: &[Vec<u8>]) -> io::Result<Frame> {
        self.send(args)?;
        loop {
            match self.read_frame()? {
                Frame::Push(items) => self.pushes.push(Frame::Push(items)),
                reply => return Ok(reply),
            }
        }
    }

    /// Sends one command without waiting for its reply.
    pub fn send(&mut self, args: &[Vec<u8>]) -> io::Result<()> {
        let mut request = Vec::new();
        encode(args, &mut request);
        self.stream.write_all(&request)
    }

    /// The socket, for shutting it down from a signal handler.
    pub fn raw_fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// The next frame the server sends, a reply or a push alike.
    pub fn read_frame(&mut self) -> io::Result<Frame> {
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match decode(&self.buffer) {
                Ok(Some((frame, used))) => {
                    self.buffer.advance(used);
                    return Ok(frame);
                }
                Ok(None) => {}
                Err(err) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("Protocol error: {err}"),
                    ))
                }
            }
            // Wait for some bytes, then take all that have arrived before decoding again: a
            // large reply is then decoded a few times, not once per chunk.
            let read = self.stream.read(&mut chunk)?;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "Server closed the connection",
                ));
            }
            self.buffer.extend_from_slice(&chunk[..read]);
            self.stream.set_nonblocking(true)?;
            let drained = loop {
                match self.stream.read(&mut chunk) {
                    Ok(0) => break Ok(()),
                    Ok(more) => self.buffer.extend_from_slice(&chunk[..more]),
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => break Ok(()),
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    Err(err) => break Err(err),
                }
            };
            self.stream.set_nonblocking(false)?;
            drained?;
        }
    }
}
