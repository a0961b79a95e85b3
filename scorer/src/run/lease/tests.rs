use super::*;

#[test]
fn the_lease_reaches_the_catalog_in_milliseconds() {
    assert_eq!(lease_millis(Duration::from_secs(30)), 30_000);
    assert_eq!(lease_millis(Duration::from_micros(1_500_999)), 1_500);
    assert_eq!(lease_millis(Duration::ZERO), 0);
}

#[test]
fn a_lease_too_long_to_count_in_milliseconds_never_expires() {
    assert_eq!(lease_millis(Duration::MAX), i64::MAX);
    let too_long = Duration::from_millis(u64::MAX);
    assert_eq!(lease_millis(too_long), i64::MAX);
}

#[test]
fn the_heartbeat_renews_three_times_a_lease() {
    let lease = Duration::from_secs(30);
    assert_eq!(heartbeat_period(lease), Duration::from_secs(10));
    // Two renewals can fail or come late and the third still lands before the lease ends.
    let lease = Duration::from_millis(1_000);
    let period = heartbeat_period(lease);
    assert!(period * 3 <= lease);
    assert!(period * 4 > lease);
}

#[test]
fn a_report_continues_stops_for_a_cancel_or_gives_the_run_up() {
    assert!(matches!(steer(RunControl::Continue), Ok(())));
    assert!(matches!(
        steer(RunControl::CancelRequested),
        Err(Stop::Canceled)
    ));
    assert!(matches!(steer(RunControl::LeaseLost), Err(Stop::LeaseLost)));
}

#[test]
fn an_error_while_working_fails_the_run_with_its_message() {
    let error = object_store::Error::Generic {
        store: "lake",
        source: "disk full".into(),
    };
    match Stop::from(error) {
        Stop::Failed(error) => {
            assert!(matches!(error, super::super::RunError::Store(_)));
            assert!(error.to_string().contains("disk full"), "{error}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}
