//! The Windows registry calls (`winreg`), kept as thin as possible (DESIGN §11). On other OSes
//! every call fails with [`InstallerError::Registry`]: plans for Windows can be computed and
//! tested anywhere, but only Windows can apply them.

use std::path::Path;

use crate::error::InstallerError;
use crate::plan::RegistryKey;

/// Set `key`'s default value to `manifest` (creating the key).
///
/// # Errors
/// [`InstallerError::Registry`] when the OS refuses (or off Windows).
pub fn set_default(key: &RegistryKey, manifest: &Path) -> Result<(), InstallerError> {
    imp::set_default(key, manifest).map_err(|source| InstallerError::Registry {
        action: "write",
        key: key.to_string(),
        source,
    })
}

/// `Ok` on Windows; elsewhere the error [`set_default`] would return for `key`.
///
/// # Errors
/// [`InstallerError::Registry`] off Windows.
pub fn ensure_supported(key: &RegistryKey) -> Result<(), InstallerError> {
    if cfg!(windows) {
        Ok(())
    } else {
        Err(InstallerError::Registry {
            action: "write",
            key: key.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the registry exists only on Windows",
            ),
        })
    }
}

/// `key`'s default value, or `None` when the key does not exist (always `None` off Windows).
///
/// # Errors
/// [`InstallerError::Registry`] when the key exists but cannot be read.
pub fn get_default(key: &RegistryKey) -> Result<Option<String>, InstallerError> {
    imp::get_default(key).map_err(|source| InstallerError::Registry {
        action: "read",
        key: key.to_string(),
        source,
    })
}

/// Delete `key`.
///
/// # Errors
/// [`InstallerError::Registry`] when the OS refuses (or off Windows).
pub fn delete(key: &RegistryKey) -> Result<(), InstallerError> {
    imp::delete(key).map_err(|source| InstallerError::Registry {
        action: "remove",
        key: key.to_string(),
        source,
    })
}

#[cfg(windows)]
mod imp {
    use std::io;
    use std::path::Path;

    use winreg::RegKey;
    use winreg::enums::{HKEY_CURRENT_USER, HKEY_LOCAL_MACHINE};

    use crate::plan::{Hive, RegistryKey};

    fn hive(key: &RegistryKey) -> RegKey {
        RegKey::predef(match key.hive {
            Hive::CurrentUser => HKEY_CURRENT_USER,
            Hive::LocalMachine => HKEY_LOCAL_MACHINE,
        })
    }

    pub(super) fn set_default(key: &RegistryKey, manifest: &Path) -> io::Result<()> {
        let (sub, _) = hive(key).create_subkey(&key.key)?;
        sub.set_value("", &manifest.as_os_str())
    }

    pub(super) fn get_default(key: &RegistryKey) -> io::Result<Option<String>> {
        match hive(key).open_subkey(&key.key) {
            Ok(sub) => match sub.get_value::<String, _>("") {
                Ok(value) => Ok(Some(value)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(super) fn delete(key: &RegistryKey) -> io::Result<()> {
        hive(key).delete_subkey_all(&key.key)
    }
}

#[cfg(not(windows))]
mod imp {
    use std::io;
    use std::path::Path;

    use crate::plan::RegistryKey;

    fn unsupported() -> io::Error {
        io::Error::new(
            io::ErrorKind::Unsupported,
            "the registry exists only on Windows",
        )
    }

    pub(super) fn set_default(_: &RegistryKey, _: &Path) -> io::Result<()> {
        Err(unsupported())
    }

    pub(super) fn get_default(_: &RegistryKey) -> io::Result<Option<String>> {
        Ok(None)
    }

    pub(super) fn delete(_: &RegistryKey) -> io::Result<()> {
        Err(unsupported())
    }
}
