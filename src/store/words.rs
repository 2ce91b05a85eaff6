//! Closed sets of words the store keeps as text (an item's state, a
//! checkpoint's), as enums.

/// A closed set of words stored as text: how each is written, and read
/// back (anything else in the column is refused as the wrong type).
macro_rules! stored_words {
    ($kind:ident { $($variant:ident => $word:literal),+ $(,)? }) => {
        impl $kind {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($kind::$variant => $word,)+
                }
            }

            pub fn parse(word: &str) -> Option<$kind> {
                match word {
                    $($word => Some($kind::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $kind {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl rusqlite::types::ToSql for $kind {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(self.as_str().into())
            }
        }

        impl rusqlite::types::FromSql for $kind {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                $kind::parse(value.as_str()?).ok_or(rusqlite::types::FromSqlError::InvalidType)
            }
        }
    };
}

pub(super) use stored_words;
