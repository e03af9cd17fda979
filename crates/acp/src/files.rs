//! The editor's files: when the editor offers `fs/read_text_file` and `fs/write_text_file`, the
//! built-in file tools read and write through it, so they see unsaved buffers and the editor
//! sees their edits. The workspace checks and the gate run first, as for the disk.

use std::path::Path;
use std::sync::OnceLock;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ReadTextFileRequest, WriteTextFileRequest};
use futures::future::BoxFuture;
use warden_agent::TextFiles;

/// Reads and writes text through the editor, for one session.
pub(crate) struct EditorFiles {
    pub(crate) connection: ConnectionTo<Client>,
    /// Set once the session is open (its id is warden's).
    pub(crate) session_id: OnceLock<String>,
}

impl EditorFiles {
    fn session_id(&self) -> Result<String, String> {
        self.session_id
            .get()
            .cloned()
            .ok_or_else(|| "the session is not open yet".to_owned())
    }
}

impl TextFiles for EditorFiles {
    fn read<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let request = ReadTextFileRequest::new(self.session_id()?, path);
            self.connection
                .send_request(request)
                .block_task()
                .await
                .map(|response| response.content)
                .map_err(|error| format!("the editor could not read it ({error})"))
        })
    }

    fn write<'a>(&'a self, path: &'a Path, content: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let request = WriteTextFileRequest::new(self.session_id()?, path, content);
            self.connection
                .send_request(request)
                .block_task()
                .await
                .map(|_| ())
                .map_err(|error| format!("the editor could not write it ({error})"))
        })
    }
}
