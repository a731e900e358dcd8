//! What the server asks of the operating system: room in the open files limit for `maxclients`, and TCP keepalive on
//! its sockets (client connections and the replica's link to its primary).

use std::time::Duration;

use tokio::net::TcpStream;

/// File descriptors kept for everything but client sockets (Redis keeps 32): standard streams, listeners, the log,
/// manifest and token files, compaction's temporary files, and each I/O thread's event loop (about 4 each).
pub fn reserved_fds(io_threads: usize) -> u64 {
    32 + 4 * io_threads as u64
}

/// Makes room in `RLIMIT_NOFILE` for `maxclients` connections, as Redis's adjustOpenFilesLimit: raises the soft limit
/// (and the hard one when the process may) if it is too low. Returns how many clients the limit allows (`maxclients`
/// when there is room, fewer when the limit could not be raised enough) and, then, why it could not; an error when
/// not even one client fits.
pub fn fit_fd_limit(maxclients: usize, io_threads: usize) -> Result<(usize, Option<String>), String> {
    let reserved = reserved_fds(io_threads);
    let needed = maxclients as u64 + reserved;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read or write the local struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        let e = std::io::Error::last_os_error();
        let n = 1024u64.saturating_sub(reserved).max(1) as usize;
        return Ok((n.min(maxclients), Some(format!("unable to obtain the current NOFILE limit ({e}), assuming 1024"))));
    }
    let (old, hard) = (lim.rlim_cur, lim.rlim_max);
    if old >= needed {
        return Ok((maxclients, None));
    }
    let set = |cur: u64, max: u64| {
        let l = libc::rlimit { rlim_cur: cur as libc::rlim_t, rlim_max: max as libc::rlim_t };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) } == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    };
    // The soft limit may go up to the hard one; past it only with privilege (and never past fs.nr_open).
    let err = match set(needed, hard.max(needed)) {
        Ok(()) => {
            tracing::info!("Increased maximum number of open files to {needed} (it was originally set to {old}).");
            return Ok((maxclients, None));
        }
        Err(e) => e,
    };
    let best = if hard > old && set(hard, hard).is_ok() { hard } else { old };
    let possible = best.saturating_sub(reserved);
    if possible < 1 {
        return Err(format!(
            "Your current 'ulimit -n' of {best} is not enough for the server to start. Please increase your open file limit to at least {needed}. Exiting."
        ));
    }
    Ok(((possible as usize).min(maxclients), Some(format!("Server can't set maximum open files to {needed} because of OS error: {err}."))))
}

/// Start-up: fits `maxclients` to the open files limit (raising the limit if allowed), lowering it with a warning
/// when the limit is too low, as Redis does.
pub fn adjust_maxclients(config: &mut crate::config::Config) -> Result<(), String> {
    let requested = config.maxclients;
    let (possible, why) = fit_fd_limit(requested, config.io_threads)?;
    if possible < requested {
        let reserved = reserved_fds(config.io_threads);
        tracing::warn!("You requested maxclients of {requested} requiring at least {} max file descriptors.", requested as u64 + reserved);
        if let Some(why) = why {
            tracing::warn!("{why}");
        }
        tracing::warn!(
            "Current maximum open files is {}. maxclients has been reduced to {possible} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
            possible as u64 + reserved
        );
        config.maxclients = possible;
    }
    Ok(())
}

/// `tcp-keepalive N`, as Redis does it: probes after N idle seconds, then every N/3 seconds, three unanswered probes
/// and the connection is dead. A client that vanished (power loss, cut network) is noticed, and its lock waits and
/// subscriptions go with it, instead of lingering until the next write to it.
pub fn set_keepalive(stream: &TcpStream, secs: u64) {
    let idle = Duration::from_secs(secs);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval(Duration::from_secs((secs / 3).max(1)))
        .with_retries(3);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive) {
        tracing::debug!("could not enable TCP keepalive: {e}");
    }
}

/// Sleeps of this thread end when asked (1 us of slack instead of the default 50 us): the I/O workers' pause under
/// load (`workers.rs`) is 20-100 us, and the default slack would add up to 50 us to it.
pub fn precise_sleeps() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes a value and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong);
    }
}
