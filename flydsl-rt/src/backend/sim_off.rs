//! The Sim backend left out (cargo feature `sim` off): uninhabited handle types with the
//! interface the dispatch in `backend/mod.rs` calls. No value of them exists, so none of this
//! runs; `Device::sim` and the Sim's enumeration are compiled out with the feature.

#![allow(dead_code, unused_variables, clippy::missing_safety_doc)]

use crate::error::Result;
use crate::launch::config::LaunchConfig;
use flydsl_ir::Kernel;
use std::time::Instant;

#[derive(Debug)]
pub(crate) enum SimDevice {}

#[derive(Debug)]
pub(crate) enum SimEvent {}

impl SimDevice {
    pub(crate) fn alloc(&self, bytes: u64) -> Result<u64> {
        match *self {}
    }
    pub(crate) fn free(&self, ptr: u64) -> Result<()> {
        match *self {}
    }
    pub(crate) fn memory_id(&self) -> u64 {
        match *self {}
    }
    pub(crate) fn enable_peer(&self, peer: u64) -> Result<()> {
        match *self {}
    }
    pub(crate) fn dtod(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        match *self {}
    }
    pub(crate) fn allocation_of(&self, addr: u64) -> Option<(u64, u64)> {
        match *self {}
    }
    pub(crate) fn htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        match *self {}
    }
    pub(crate) fn dtoh(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        match *self {}
    }
    pub(crate) fn memset_zero(&self, dst: u64, bytes: u64) -> Result<()> {
        match *self {}
    }
    pub(crate) fn launch(&self, kernel: &Kernel, cfg: &LaunchConfig, args: &[u8]) -> Result<()> {
        match *self {}
    }
    pub(crate) fn event(&self) -> Result<SimEvent> {
        match *self {}
    }
    pub(crate) fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        match *self {}
    }
    pub(crate) unsafe fn host_free(&self, ptr: *mut u8, bytes: usize) -> Result<()> {
        match *self {}
    }
}

impl SimEvent {
    pub(crate) fn record(&self) {
        match *self {}
    }
    pub(crate) fn time(&self) -> Option<Instant> {
        match *self {}
    }
}
