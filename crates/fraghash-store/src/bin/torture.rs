//! Test helper for the crash tests of `fraghash-store` (not a user tool).
//!
//! - `work DIR ACKS SEED SCHEME`: open (or create) the table, then two writer
//!   threads put and delete while a third adds, removes, splits and
//!   rebalances, until killed. Each write is logged to ACKS as `I key value`
//!   before it starts and `A key value` once acknowledged (`-` = delete).
//! - `op DIR OP [ARG]`: one operation (`add`, `remove N`, `split N`,
//!   `rebalance`), with the failpoint of `FRAGHASH_STORE_FAILPOINT` armed.
//! - `fill DIR BYTES`: under `setrlimit(RLIMIT_FSIZE, BYTES)`, put 1 KiB
//!   values until a write fails; prints `acked N` and the error.
//! - `hold DIR`: open the table, print `open`, sleep 30 s.

use std::fs::OpenOptions;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fraghash_store::{Table, TableOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn open_or_create(dir: &str, scheme: &str) -> Table {
    if std::path::Path::new(dir).join("MANIFEST").exists() {
        Table::open(dir).unwrap_or_else(|e| fail(&e.to_string()))
    } else {
        let o = TableOptions {
            scheme: scheme.into(),
            fragments: 3,
            dirs: vec![],
        };
        Table::create(dir, &o).unwrap_or_else(|e| fail(&e.to_string()))
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("torture: {msg}");
    std::process::exit(3)
}

fn work(dir: &str, acks: &str, seed: u64, scheme: &str) {
    let t = open_or_create(dir, scheme);
    t.set_batch_size(16);
    let log = Arc::new(Mutex::new(
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(acks)
            .unwrap_or_else(|e| fail(&e.to_string())),
    ));
    println!("ready");
    let _ = std::io::stdout().flush();
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for w in 0..2u64 {
        let (t, log, stop) = (t.clone(), log.clone(), stop.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng(seed.wrapping_mul(31).wrapping_add(w) | 1);
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("w{w}-{}", rng.below(400));
                seq += 1;
                let val = format!("{seed}.{seq}");
                let del = rng.below(10) == 0;
                let shown = if del { "-" } else { val.as_str() };
                let line = |tag: &str| format!("{tag} {key} {shown}\n");
                log.lock().unwrap().write_all(line("I").as_bytes()).unwrap();
                let r = if del {
                    t.delete(key.as_bytes()).map(|_| ())
                } else {
                    t.put(key.as_bytes(), val.as_bytes())
                };
                match r {
                    Ok(()) => log.lock().unwrap().write_all(line("A").as_bytes()).unwrap(),
                    Err(e) => fail(&format!("write failed: {e}")),
                }
            }
        }));
    }
    let mut rng = Rng(seed | 1);
    let spec = t.scheme();
    let any = spec == "slots" || spec.starts_with("ring");
    for _ in 0..10_000 {
        let n = t.fragments();
        let r = rng.below(4);
        let res = if n <= 2 || (r == 0 && n < 7) {
            t.add_fragment()
        } else if r == 1 || n >= 7 {
            let which = if any {
                rng.below(n as u64) as u32
            } else {
                n - 1
            };
            t.remove_fragment(which)
        } else if spec == "slots" && r == 2 {
            t.split_fragment(rng.below(n as u64) as u32)
        } else if spec == "slots" {
            t.rebalance()
        } else {
            t.add_fragment()
        };
        if let Err(e) = res {
            fail(&format!("migration failed: {e}"));
        }
        std::thread::sleep(Duration::from_millis(rng.below(20)));
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
}

fn op(dir: &str, what: &str, arg: Option<u32>) {
    let t = Table::open(dir).unwrap_or_else(|e| fail(&e.to_string()));
    t.set_batch_size(100);
    let r = match what {
        "add" => t.add_fragment(),
        "remove" => t.remove_fragment(arg.unwrap_or(0)),
        "split" => t.split_fragment(arg.unwrap_or(0)),
        "rebalance" => t.rebalance(),
        other => fail(&format!("unknown op {other}")),
    };
    match r {
        Ok(r) => println!("done {} -> {}", r.fragments_before, r.fragments_after),
        Err(e) => fail(&e.to_string()),
    }
}

fn fill(dir: &str, limit: u64) {
    // SAFETY: plain libc calls on this process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
            fail("setrlimit failed");
        }
    }
    let t = Table::open(dir).unwrap_or_else(|e| fail(&e.to_string()));
    let val = vec![b'x'; 1024];
    let mut acked = 0u64;
    let err = loop {
        match t.put(format!("fill-{acked}").as_bytes(), &val) {
            Ok(()) => {
                acked += 1;
                println!("acked {acked}");
            }
            Err(e) => break e,
        }
        if acked > 1_000_000 {
            fail("the file size limit never hit");
        }
    };
    println!("error: {err}");
    println!("disk_full: {}", err.is_disk_full());
    match t.add_fragment() {
        Ok(_) => println!("add: ok"),
        Err(e) => println!("add: {e}"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match a(0) {
        "work" => work(a(1), a(2), a(3).parse().unwrap_or(1), a(4)),
        "op" => op(a(1), a(2), a(3).parse().ok()),
        "fill" => fill(a(1), a(2).parse().unwrap_or(1 << 20)),
        "hold" => {
            let _t = Table::open(a(1)).unwrap_or_else(|e| fail(&e.to_string()));
            println!("open");
            let _ = std::io::stdout().flush();
            std::thread::sleep(Duration::from_secs(30));
        }
        _ => fail("usage: torture work|op|fill|hold ..."),
    }
    ExitCode::SUCCESS
}
