//! The digits MLP (64-128-10, ReLU, cross-entropy, Adam) through the tape and the fused optimizer.
//!
//!     python3 examples/export_digits.py digits.tldg        # scikit-learn's 1797 8x8 digits
//!     TLRT_LIB_DIR=build cargo run --offline --release --example digits_mlp -- digits.tldg [--cuda]
//!
//! Data file (little-endian): magic b"TLDG", u32 n, u32 d (64), n*d f32 features in [0, 1],
//! n u8 labels. Fixed-seed shuffle, 80/20 train/test split, mini-batches of 64, 40 epochs; one
//! line per epoch (loss, train and test accuracy, seconds); exits 1 if the test accuracy is below
//! 95%. Every library error is reported with its status and message.
use std::process::ExitCode;
use std::time::Instant;
use torchlean_rt::{self as rt, Buffer, Device, Tape, Result};

const HIDDEN: usize = 128;
const CLASSES: usize = 10;
const BATCH: usize = 64;
const EPOCHS: usize = 40;
const LR: f64 = 1e-3;

struct Data {
    n: usize,
    d: usize,
    x: Vec<f32>,
    y: Vec<u8>,
}

fn load(path: &str) -> std::result::Result<Data, String> {
    let raw = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    if raw.len() < 12 || &raw[..4] != b"TLDG" {
        return Err(format!("{path}: not a TLDG file"));
    }
    let u32_at = |i: usize| u32::from_le_bytes(raw[i..i + 4].try_into().unwrap()) as usize;
    let (n, d) = (u32_at(4), u32_at(8));
    let want = 12 + n * d * 4 + n;
    if raw.len() != want {
        return Err(format!("{path}: {} bytes, expected {want} for n={n} d={d}", raw.len()));
    }
    let x = raw[12..12 + n * d * 4].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let y = raw[12 + n * d * 4..].to_vec();
    if y.iter().any(|&l| l as usize >= CLASSES) {
        return Err(format!("{path}: a label is not a digit"));
    }
    Ok(Data { n, d, x, y })
}

/// SplitMix64: the fixed-seed shuffle and the weight initialisation.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A parameter with its Adam state.
struct Param {
    value: Buffer,
    m: Buffer,
    v: Buffer,
    dims: Vec<u64>,
}

impl Param {
    /// PyTorch's nn.Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    fn new(dims: &[u64], fan_in: usize, rng: &mut Rng, dev: Device) -> Result<Param> {
        let n: u64 = dims.iter().product();
        let bound = 1.0 / (fan_in as f64).sqrt();
        let init: Vec<f32> = (0..n).map(|_| ((rng.uniform() * 2.0 - 1.0) * bound) as f32).collect();
        Ok(Param { value: Buffer::from_f32(&init, dev)?, m: Buffer::zeros(n, dev)?,
                   v: Buffer::zeros(n, dev)?, dims: dims.to_vec() })
    }
}

/// Records the forward pass; returns the logits node and the parameter nodes.
fn forward(t: &mut Tape, params: &[Param], x: &Buffer, rows: usize, d: usize, grad: bool) -> Result<(u64, Vec<u64>)> {
    let ids = params.iter().map(|p| t.leaf(&p.value, &p.dims, grad)).collect::<Result<Vec<_>>>()?;
    let xn = t.leaf(x, &[rows as u64, d as u64], false)?;
    let h = t.linear(xn, ids[0], ids[1])?;
    let a = t.relu(h)?;
    Ok((t.linear(a, ids[2], ids[3])?, ids))
}

fn correct(logits: &[f32], labels: &[u8]) -> usize {
    logits.chunks_exact(CLASSES).zip(labels).filter(|(row, &l)| {
        let best = row.iter().enumerate().fold(0, |b, (i, &v)| if v > row[b] { i } else { b });
        best == l as usize
    }).count()
}

fn gather(data: &Data, idx: &[usize]) -> (Vec<f32>, Vec<u8>) {
    let mut x = Vec::with_capacity(idx.len() * data.d);
    for &i in idx {
        x.extend_from_slice(&data.x[i * data.d..(i + 1) * data.d]);
    }
    (x, idx.iter().map(|&i| data.y[i]).collect())
}

fn accuracy(t: &mut Tape, params: &[Param], data: &Data, idx: &[usize], dev: Device) -> Result<f64> {
    let (x, y) = gather(data, idx);
    let xb = Buffer::from_f32(&x, dev)?;
    let (logits, _) = forward(t, params, &xb, idx.len(), data.d, false)?;
    let out = t.value(logits)?.to_vec()?;
    t.reset()?;
    Ok(correct(&out, &y) as f64 / idx.len() as f64)
}

fn train(data: &Data, dev: Device) -> Result<f64> {
    let mut rng = Rng(20240607);
    let mut order: Vec<usize> = (0..data.n).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let n_train = data.n * 4 / 5;
    let (train_idx, test_idx) = order.split_at(n_train);
    let mut train_idx = train_idx.to_vec();
    let d = data.d;
    let params = vec![
        Param::new(&[HIDDEN as u64, d as u64], d, &mut rng, dev)?,
        Param::new(&[HIDDEN as u64], d, &mut rng, dev)?,
        Param::new(&[CLASSES as u64, HIDDEN as u64], HIDDEN, &mut rng, dev)?,
        Param::new(&[CLASSES as u64], HIDDEN, &mut rng, dev)?,
    ];
    let mut t = Tape::new(dev)?;
    let mut step = 0u64;
    let mut test_acc = 0.0;
    println!("digits_mlp: {} train / {} test samples, MLP {d}-{HIDDEN}-{CLASSES}, Adam lr {LR}, device {dev}",
             train_idx.len(), test_idx.len());
    for epoch in 1..=EPOCHS {
        let t0 = Instant::now();
        for i in (1..train_idx.len()).rev() {
            train_idx.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        let (mut loss_sum, mut hits) = (0.0f64, 0usize);
        for chunk in train_idx.chunks(BATCH) {
            let (x, y) = gather(data, chunk);
            let xb = Buffer::from_f32(&x, dev)?;
            let (logits, ids) = forward(&mut t, &params, &xb, chunk.len(), d, true)?;
            let labels: Vec<u64> = y.iter().map(|&l| l as u64).collect();
            let loss = t.cross_entropy(logits, &labels)?;
            t.backward(loss)?;
            step += 1;
            for (p, &id) in params.iter().zip(&ids) {
                let g = t.grad(id)?;
                rt::adam_step(&p.value, &g, &p.m, &p.v, step, LR, 0.9, 0.999, 1e-8, 0.0, false)?;
            }
            loss_sum += t.value(loss)?.to_vec()?[0] as f64 * chunk.len() as f64;
            hits += correct(&t.value(logits)?.to_vec()?, &y);
            t.reset()?;
        }
        test_acc = accuracy(&mut t, &params, data, test_idx, dev)?;
        println!("epoch {epoch:2}  loss {:.4}  train acc {:.4}  test acc {:.4}  {:.2}s",
                 loss_sum / train_idx.len() as f64, hits as f64 / train_idx.len() as f64, test_acc,
                 t0.elapsed().as_secs_f64());
    }
    Ok(test_acc)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dev = if args.iter().any(|a| a == "--cuda") { Device::cuda(0) } else { Device::CPU };
    let path = args.iter().find(|a| !a.starts_with("--")).cloned().unwrap_or_else(|| "digits.tldg".into());
    let data = match load(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("digits_mlp: {e} (write it with: python3 examples/export_digits.py {path})");
            return ExitCode::from(2);
        }
    };
    match train(&data, dev) {
        Ok(acc) => {
            println!("final test accuracy {:.4} ({})", acc, if acc >= 0.95 { "ok, >= 0.95" } else { "BELOW 0.95" });
            if acc >= 0.95 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(e) => {
            eprintln!("digits_mlp: {e}");
            ExitCode::FAILURE
        }
    }
}
