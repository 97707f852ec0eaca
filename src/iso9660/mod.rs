//! PLACEHOLDER: replaced by the ISO 9660 module.
use std::io::{Read, Seek, Write};
#[derive(Debug, thiserror::Error)]
pub enum IsoError {
    #[error("placeholder")]
    Placeholder,
}
pub struct WriteOptions {
    pub volume_id: String,
    pub timestamp: i64,
}
#[derive(Default)]
pub struct IsoBuilder;
impl IsoBuilder {
    pub fn new() -> Self {
        Self
    }
    pub fn add_dir(&mut self, _p: &str, _m: u32) -> Result<(), IsoError> {
        Ok(())
    }
    pub fn add_file(&mut self, _p: &str, _d: Vec<u8>, _m: u32) -> Result<(), IsoError> {
        Ok(())
    }
    pub fn write<W: Write>(&self, _o: &WriteOptions, _out: W) -> Result<(), IsoError> {
        Err(IsoError::Placeholder)
    }
}
pub struct Entry {
    pub path: String,
    pub iso_path: String,
    pub is_dir: bool,
    pub mode: Option<u32>,
    pub size: u64,
    pub extent: u32,
}
pub struct IsoReader<R> {
    _r: R,
}
impl<R: Read + Seek> IsoReader<R> {
    pub fn open(_r: R) -> Result<Self, IsoError> {
        Err(IsoError::Placeholder)
    }
    pub fn volume_id(&self) -> &str {
        ""
    }
    pub fn walk(&mut self) -> Result<Vec<Entry>, IsoError> {
        Err(IsoError::Placeholder)
    }
    pub fn read_file(&mut self, _p: &str) -> Result<Vec<u8>, IsoError> {
        Err(IsoError::Placeholder)
    }
}
