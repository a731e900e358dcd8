//! What can be sent as a command argument.

use bytes::Bytes;

/// A value that becomes one command argument (a RESP bulk string): strings and bytes as they are, numbers in
/// decimal.
pub trait ToArg {
    /// The argument's bytes.
    fn to_arg(&self) -> Bytes;
}

impl<T: ToArg + ?Sized> ToArg for &T {
    fn to_arg(&self) -> Bytes {
        (**self).to_arg()
    }
}

impl ToArg for str {
    fn to_arg(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }
}

impl ToArg for String {
    fn to_arg(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }
}

impl ToArg for [u8] {
    fn to_arg(&self) -> Bytes {
        Bytes::copy_from_slice(self)
    }
}

impl<const N: usize> ToArg for [u8; N] {
    fn to_arg(&self) -> Bytes {
        Bytes::copy_from_slice(self)
    }
}

impl ToArg for Vec<u8> {
    fn to_arg(&self) -> Bytes {
        Bytes::copy_from_slice(self)
    }
}

impl ToArg for Bytes {
    fn to_arg(&self) -> Bytes {
        self.clone()
    }
}

macro_rules! decimal {
    ($($t:ty),*) => {$(
        impl ToArg for $t {
            fn to_arg(&self) -> Bytes {
                Bytes::from(self.to_string())
            }
        }
    )*};
}
decimal!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64);

/// A fencing token as an argument of `RENEW`, `RELEASE` and `IFGT`.
///
/// Tokens are positive signed 64-bit integers ([`Token`](crate::Token) = `i64`); `u64` is accepted as well so
/// that `token as u64` works.
pub trait TokenArg: ToArg {
    /// The token as a 64-bit integer, or `None` when it is not one (then no server can have issued it).
    #[doc(hidden)]
    fn token_value(&self) -> Option<i64> {
        ruvio_protocol::lock_args::parse_integer(&self.to_arg())
    }
}

impl TokenArg for i64 {
    fn token_value(&self) -> Option<i64> {
        Some(*self)
    }
}

impl TokenArg for u64 {
    fn token_value(&self) -> Option<i64> {
        i64::try_from(*self).ok()
    }
}

impl<T: TokenArg + ?Sized> TokenArg for &T {
    fn token_value(&self) -> Option<i64> {
        (**self).token_value()
    }
}
