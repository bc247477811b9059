//! The GPT-2-style language model of examples/lm/gpt.py and gpt.c through the safe Rust crate's
//! tape, trained on the Python 3.11 documentation's text (Debian's python3.11-doc).
//!
//!     TLRT_LIB_DIR=build cargo run --offline --release --example gpt -- --quick
//!     TLRT_LIB_DIR=build cargo run --offline --release --example gpt -- --cuda --steps 1000
//!
//! The model, the initialisation, the batches, dropout keys, AdamW (the fused `adam_step_multi`, decay
//! on matrices only), the cosine schedule with warm-up and the clipping by global norm are gpt.c's,
//! call for call and key for key, so on the CPU the three programs print the same losses
//! (attention: the fused q / k / v projection read in place by `attention_qkv`, as there; the
//! sample here is drawn from one forward over the last ctx bytes per step, not with gpt.py's and
//! gpt.c's KV cache). Options: `--quick` (the CPU configuration of CI: d 64, 2 layers, 4 heads,
//! context 64, batch 8, 150 steps), `--cuda` (the small configuration on the first GPU unless
//! `--quick`), `--steps N`, `--data FILE_OR_FOLDER`, `--log-every N`, `--seed S`, `--sample-length
//! N`, `--temperature T`, `--min-improvement X` (exit 1 unless the validation loss fell by X nats)
//! and `--test` (exit 77, skipped, without the text). Checkpoints are gpt.c's and gpt.py's business
//! (`--save` / `--resume` there); this example shows the training loop.
use std::process::ExitCode;
use std::time::Instant;
use torchlean_rt::{self as rt, Buffer, Device, Result, Tape};

const DOC_SOURCES: &str = "/usr/share/doc/python3.11/html/_sources";

#[derive(Clone, Copy)]
struct Config {
    d: u64,
    layers: u64,
    heads: u64,
    ctx: u64,
    batch: u64,
    steps: u64,
    warmup: u64,
    lr: f64,
}
const VOCAB: u64 = 256;
const QUICK: Config = Config { d: 64, layers: 2, heads: 4, ctx: 64, batch: 8, steps: 150, warmup: 15, lr: 3e-3 };
const SMALL: Config = Config { d: 384, layers: 6, heads: 6, ctx: 256, batch: 16, steps: 3000, warmup: 200, lr: 6e-4 };

/// SplitMix64's output function (lm.py's mix, gpt.c's mix).
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
fn window_starts(stream: u64, first: u64, count: u64, span: u64) -> Vec<u64> {
    (0..count).map(|i| mix(stream.wrapping_add(first + i)) % span).collect()
}

/// lm.py's load_text: (train, validation) bytes of a file or of the *.txt files under a folder.
fn load_text(path: &str) -> std::result::Result<(Vec<u8>, Vec<u8>), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{path}: {e}"))?;
    if meta.is_file() {
        let all = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let cut = all.len() * 19 / 20;
        return Ok((all[..cut].to_vec(), all[cut..].to_vec()));
    }
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.is_file() && name.len() > 4 && name.ends_with(".txt") {
                out.push(p.to_string_lossy().into_owned());
            }
        }
    }
    let mut files = Vec::new();
    walk(std::path::Path::new(path), &mut files);
    if files.is_empty() {
        return Err(format!("no text under {path} (apt-get install python3.11-doc, or --data PATH)"));
    }
    files.sort(); // byte order, as Python's sorted() and gpt.c's strcmp
    let (mut train, mut val) = (Vec::new(), Vec::new());
    let mut counts = [0usize; 2]; // files joined with b"\n" (lm.py's b"\n".join)
    for (i, f) in files.iter().enumerate() {
        let side = (i % 20 == 19) as usize;
        let dst = if side == 1 { &mut val } else { &mut train };
        if counts[side] > 0 {
            dst.push(b'\n');
        }
        counts[side] += 1;
        dst.extend(std::fs::read(f).map_err(|e| format!("{f}: {e}"))?);
    }
    Ok((train, val))
}

struct Param {
    #[allow(dead_code)] // gpt.py's parameter names ("h0.attn.wq"), for a checkpoint
    name: String,
    dims: Vec<u64>,
    decay: bool,
    w: Buffer,
    m: Buffer,
    v: Buffer,
}

struct Model {
    cfg: Config,
    dev: Device,
    p: Vec<Param>,
    pos: Buffer,
}

impl Model {
    /// gpt.py's init_params, in its order (the order of leaves, clipping and AdamW).
    fn new(cfg: Config, dev: Device, seed: u64) -> Result<Model> {
        let (d, l) = (cfg.d, cfg.layers);
        let mut key = seed.wrapping_mul(1_000_003);
        let mut p = Vec::new();
        let mut normal = |p: &mut Vec<Param>, name: String, dims: Vec<u64>, std: f64| -> Result<()> {
            key = key.wrapping_add(1 << 32);
            let n = dims.iter().product();
            p.push(Param { name, dims, decay: true, w: rt::rand_normal(dev, n, 0.0, std, key)?,
                           m: Buffer::zeros(n, dev)?, v: Buffer::zeros(n, dev)? });
            Ok(())
        };
        let constant = |p: &mut Vec<Param>, name: String, n: u64, value: f64| -> Result<()> {
            p.push(Param { name, dims: vec![n], decay: false, w: Buffer::full(n, value, dev)?,
                           m: Buffer::zeros(n, dev)?, v: Buffer::zeros(n, dev)? });
            Ok(())
        };
        let proj_std = 0.02 / ((2 * l) as f64).sqrt();
        normal(&mut p, "wte".into(), vec![VOCAB, d], 0.02)?;
        normal(&mut p, "wpe".into(), vec![cfg.ctx, d], 0.01)?;
        for i in 0..l {
            let n = |s: &str| format!("h{i}.{s}");
            constant(&mut p, n("ln1.g"), d, 1.0)?;
            constant(&mut p, n("ln1.b"), d, 0.0)?;
            for w in ["q", "k", "v"] {
                normal(&mut p, n(&format!("attn.w{w}")), vec![d, d], 0.02)?;
                constant(&mut p, n(&format!("attn.b{w}")), d, 0.0)?;
            }
            normal(&mut p, n("attn.wo"), vec![d, d], proj_std)?;
            constant(&mut p, n("attn.bo"), d, 0.0)?;
            constant(&mut p, n("ln2.g"), d, 1.0)?;
            constant(&mut p, n("ln2.b"), d, 0.0)?;
            normal(&mut p, n("mlp.wfc"), vec![4 * d, d], 0.02)?;
            constant(&mut p, n("mlp.bfc"), 4 * d, 0.0)?;
            normal(&mut p, n("mlp.wproj"), vec![d, 4 * d], proj_std)?;
            constant(&mut p, n("mlp.bproj"), d, 0.0)?;
        }
        constant(&mut p, "lnf.g".into(), d, 1.0)?;
        constant(&mut p, "lnf.b".into(), d, 0.0)?;
        let pos: Vec<i32> = (0..cfg.batch * cfg.ctx).map(|i| (i % cfg.ctx) as i32).collect();
        Ok(Model { cfg, dev, p, pos: Buffer::from_i32(&pos, dev)? })
    }

    fn count(&self) -> u64 {
        self.p.iter().map(|p| p.dims.iter().product::<u64>()).sum()
    }

    /// gpt.py's forward: the leaves (ids in parameter order) and the (batch * n, vocab) logits.
    /// Each node is released right after its last use (as gpt.c does), so the tape holds only
    /// what the backward rules read.
    #[allow(clippy::too_many_arguments)]
    fn forward(&self, t: &mut Tape, tokens: &Buffer, positions: &Buffer, batch: u64, n: u64,
               train: bool, dropout: f64, mut key: u64) -> Result<(Vec<u64>, u64)> {
        let (d, rows) = (self.cfg.d, batch * n);
        let ids = self.p.iter().map(|p| t.leaf(&p.w, &p.dims, train)).collect::<Result<Vec<_>>>()?;
        let mut drop = |t: &mut Tape, x: u64| -> Result<u64> {
            if !train || dropout == 0.0 {
                return Ok(x);
            }
            key = key.wrapping_add(rows * d * 8); // disjoint key ranges, as gpt.py's drop()
            let y = t.dropout(x, dropout, key)?;
            t.release(x)?;
            Ok(y)
        };
        let e1 = t.gather_rows_ibuf(ids[0], tokens)?;
        let e2 = t.gather_rows_ibuf(ids[1], positions)?;
        let x0 = t.add(e1, e2)?;
        t.release(e1)?;
        t.release(e2)?;
        let x0 = drop(t, x0)?;
        let mut x = t.reshape(x0, &[batch, n, d])?;
        t.release(x0)?;
        for i in 0..self.cfg.layers as usize {
            let q = &ids[2 + 16 * i..2 + 16 * (i + 1)];
            let h = t.layer_norm(x, q[0], q[1], 1e-5)?;
            let h2 = t.reshape(h, &[rows, d])?;
            t.release(h)?;
            // One (3 d, d) projection, read in place by the attention node (heads_kv = heads).
            let wqk = t.concat_axis0(q[2], q[4])?;
            let wqkv = t.concat_axis0(wqk, q[6])?;
            let bqk = t.concat1d(q[3], q[5])?;
            let bqkv = t.concat1d(bqk, q[7])?;
            let qkv = t.linear(h2, wqkv, bqkv)?;
            for id in [wqk, wqkv, bqk, bqkv, h2] {
                t.release(id)?;
            }
            let qkv3 = t.reshape(qkv, &[batch, n, 3 * d])?;
            let heads = self.cfg.heads;
            let a1 = t.attention_qkv(qkv3, heads, heads, true, 1.0 / ((d / heads) as f64).sqrt())?;
            let a2 = t.reshape(a1, &[rows, d])?;
            let a3 = t.linear(a2, q[8], q[9])?;
            let a = t.reshape(a3, &[batch, n, d])?;
            for id in [qkv, qkv3, a1, a2, a3] {
                t.release(id)?;
            }
            let a = drop(t, a)?;
            let y = t.add(x, a)?;
            t.release(x)?;
            t.release(a)?;
            x = y;
            let h = t.layer_norm(x, q[10], q[11], 1e-5)?;
            let h2 = t.reshape(h, &[rows, d])?;
            t.release(h)?;
            let g = t.linear_gelu(h2, q[12], q[13])?;
            t.release(h2)?;
            let f = t.linear(g, q[14], q[15])?;
            t.release(g)?;
            let f = drop(t, f)?;
            let f3 = t.reshape(f, &[batch, n, d])?;
            t.release(f)?;
            let y = t.add(x, f3)?;
            t.release(x)?;
            t.release(f3)?;
            x = y;
        }
        let np = ids.len();
        let h = t.layer_norm(x, ids[np - 2], ids[np - 1], 1e-5)?;
        t.release(x)?;
        let h2 = t.reshape(h, &[rows, d])?;
        t.release(h)?;
        let logits = t.matmul(h2, ids[0], false, true)?; // the tied LM head: x wte^T
        t.release(h2)?;
        Ok((ids, logits))
    }
}

fn upload(text: &[u8], starts: &[u64], ctx: u64, dev: Device) -> Result<(Buffer, Buffer)> {
    let (mut tk, mut lb) = (Vec::new(), Vec::new());
    for &s in starts {
        let w = &text[s as usize..(s + ctx + 1) as usize];
        tk.extend(w[..ctx as usize].iter().map(|&b| b as i32));
        lb.extend(w[1..].iter().map(|&b| b as i32));
    }
    Ok((Buffer::from_i32(&tk, dev)?, Buffer::from_i32(&lb, dev)?))
}

/// C's "%.2e" (Rust's {:.2e} writes "3.00e-3"): the progress lines read as gpt.c's.
fn sci(x: f64) -> String {
    let s = format!("{x:.2e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let e: i32 = e.parse().unwrap_or(0);
            format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
        }
        None => s,
    }
}

fn lr_at(step: u64, cfg: &Config) -> f64 {
    if step < cfg.warmup {
        return cfg.lr * (step + 1) as f64 / cfg.warmup as f64;
    }
    let q = ((step - cfg.warmup) as f64 / cfg.steps.saturating_sub(cfg.warmup).max(1) as f64).min(1.0);
    cfg.lr * (0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * q).cos()))
}

/// lm.py's train_step: forward, loss, backward, clipping by global norm, AdamW; the loss.
fn train_step(m: &Model, t: &mut Tape, tokens: &Buffer, labels: &Buffer, step: u64, lr: f64,
              seed: u64) -> Result<f32> {
    let (ids, logits) = m.forward(t, tokens, &m.pos, m.cfg.batch, m.cfg.ctx, true, 0.1,
                                  (seed + step) << 40)?;
    let loss = t.cross_entropy_ibuf(logits, labels)?;
    t.release(logits)?; // the host is done with them; the loss node keeps them for backward
    t.backward_ex(loss, None, rt::sys::TLRT_TAPE_BACKWARD_FREE)?; // frees the graph as it goes
    let grads = ids.iter().map(|&id| t.grad(id)).collect::<Result<Vec<_>>>()?;
    let value = t.value(loss)?;
    t.reset()?;
    let refs: Vec<&Buffer> = grads.iter().collect();
    rt::clip_grad_norm(&refs, 1.0)?; // on the device, in place (no host read)
    // AdamW on every parameter in one call (one launch on CUDA).
    let ws: Vec<&Buffer> = m.p.iter().map(|p| &p.w).collect();
    let ms: Vec<&Buffer> = m.p.iter().map(|p| &p.m).collect();
    let vs: Vec<&Buffer> = m.p.iter().map(|p| &p.v).collect();
    let wds: Vec<f64> = m.p.iter().map(|p| if p.decay { 0.1 } else { 0.0 }).collect();
    rt::adam_step_multi(&ws, &refs, &ms, &vs, &wds, step + 1, lr, 0.9, 0.95, 1e-8, true)?;
    Ok(value.to_vec()?[0])
}

fn evaluate(m: &Model, t: &mut Tape, text: &[u8]) -> Result<f64> {
    let (b, c) = (m.cfg.batch, m.cfg.ctx);
    let mut total = 0.0;
    for j in 0..8 {
        let starts = window_starts(mix(0x6576_616C), j * b, b, text.len() as u64 - c - 1);
        let (tokens, labels) = upload(text, &starts, c, m.dev)?;
        let (_, logits) = m.forward(t, &tokens, &m.pos, b, c, false, 0.0, 0)?;
        let loss = t.cross_entropy_ibuf(logits, &labels)?;
        total += t.value(loss)?.to_vec()?[0] as f64;
        t.reset()?;
    }
    Ok(total / 8.0)
}

fn sample(m: &Model, t: &mut Tape, prompt: &[u8], length: u64, temperature: f64, seed: u64)
          -> Result<Vec<u8>> {
    let (ctx, stream) = (m.cfg.ctx as usize, mix(seed + 0x7361_6D70));
    let mut out = prompt.to_vec();
    for k in 0..length {
        let window = &out[out.len().saturating_sub(ctx)..];
        let n = window.len() as u64;
        let tokens = Buffer::from_i32(&window.iter().map(|&b| b as i32).collect::<Vec<_>>(), m.dev)?;
        let positions = Buffer::from_i32(&(0..n as i32).collect::<Vec<_>>(), m.dev)?;
        let (_, logits) = m.forward(t, &tokens, &positions, 1, n, false, 0.0, 0)?;
        let z = rt::slice_axis0(&t.value(logits)?, n, VOCAB, n - 1, 1)?.to_vec()?;
        t.reset()?;
        let next = if temperature <= 0.0 {
            (1..z.len()).fold(0, |b, i| if z[i] > z[b] { i } else { b })
        } else {
            let mx = z.iter().fold(z[0] as f64, |a, &v| a.max(v as f64));
            let w: Vec<f64> = z.iter().map(|&v| ((v as f64 - mx) / temperature).exp()).collect();
            let sum = w.iter().fold(0.0, |a, &x| a + x);
            let target = (mix(stream.wrapping_add(k)) >> 11) as f64 * (1.0 / 9007199254740992.0) * sum;
            let mut acc = 0.0;
            w.iter().position(|&x| { acc += x; acc > target }).unwrap_or(z.len() - 1)
        };
        out.push(next as u8);
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut quick, mut cuda, mut test) = (false, false, false);
    let (mut steps, mut log_every, mut sample_length) = (None, None, None);
    let (mut seed, mut temperature, mut min_improvement) = (1234u64, 0.8f64, None);
    let mut data = DOC_SOURCES.to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        let r: std::result::Result<(), String> = (|| {
            match a.as_str() {
                "--quick" => quick = true,
                "--cuda" => cuda = true,
                "--test" => test = true,
                "--steps" => steps = Some(value(a)?.parse::<u64>().map_err(|e| e.to_string())?),
                "--log-every" => log_every = Some(value(a)?.parse::<u64>().map_err(|e| e.to_string())?),
                "--sample-length" => sample_length = Some(value(a)?.parse::<u64>().map_err(|e| e.to_string())?),
                "--seed" => seed = value(a)?.parse::<u64>().map_err(|e| e.to_string())?,
                "--temperature" => temperature = value(a)?.parse::<f64>().map_err(|e| e.to_string())?,
                "--min-improvement" => min_improvement = Some(value(a)?.parse::<f64>().map_err(|e| e.to_string())?),
                "--data" => data = value(a)?,
                _ => return Err(format!("unknown option {a}")),
            }
            Ok(())
        })();
        if let Err(e) = r {
            eprintln!("gpt: {e}\nusage: gpt [--quick] [--cuda] [--steps N] [--data PATH] [--log-every N] \
                       [--seed S] [--sample-length N] [--temperature T] [--min-improvement X] [--test]");
            return ExitCode::from(2);
        }
    }
    if test && std::fs::metadata(&data).is_err() {
        println!("gpt: skipped (no {data}: apt-get install python3.11-doc)");
        return ExitCode::from(77);
    }
    let mut cfg = if cuda && !quick { SMALL } else { QUICK };
    if let Some(s) = steps.filter(|&s| s > 0) {
        cfg.steps = s;
    }
    let (train, val) = match load_text(&data) {
        Ok(tv) => tv,
        Err(e) => {
            eprintln!("gpt: {e}");
            return ExitCode::from(1);
        }
    };
    if train.len() as u64 <= cfg.ctx + 2 || val.len() as u64 <= cfg.ctx + 2 {
        eprintln!("gpt: too little text for a context of {}", cfg.ctx);
        return ExitCode::from(1);
    }
    let dev = if cuda { Device::cuda(0) } else { Device::CPU };
    let run = || -> Result<(f64, f64)> {
        println!("gpt: {} training / {} validation bytes from {data}; {dev}", train.len(), val.len());
        let model = Model::new(cfg, dev, seed)?;
        println!("gpt: d {}, layers {}, heads {}, ctx {}, batch {}, vocab {VOCAB}; {} parameters, {} steps",
                 cfg.d, cfg.layers, cfg.heads, cfg.ctx, cfg.batch, model.count(), cfg.steps);
        let mut t = Tape::new(dev)?;
        let val0 = evaluate(&model, &mut t, &val)?;
        println!("gpt: validation loss at initialisation {val0:.4} (ln 256 = {:.4})", 256f64.ln());
        let log_every = log_every.filter(|&n| n > 0).unwrap_or((cfg.steps / 10).max(1));
        let stream = mix(seed);
        let (mut t_log, mut loss_sum, mut n_sum) = (Instant::now(), 0.0f64, 0u64);
        for step in 0..cfg.steps {
            let starts = window_starts(stream, step * cfg.batch, cfg.batch, train.len() as u64 - cfg.ctx - 1);
            let (tokens, labels) = upload(&train, &starts, cfg.ctx, dev)?;
            let lr = lr_at(step, &cfg);
            loss_sum += train_step(&model, &mut t, &tokens, &labels, step, lr, seed)? as f64;
            n_sum += 1;
            if (step + 1) % log_every == 0 || step + 1 == cfg.steps {
                rt::synchronize(dev)?;
                let dt = t_log.elapsed().as_secs_f64();
                println!("step {:5}  loss {:.4}  lr {}  {:9.0} tokens/s  {:7.2} ms/step", step + 1,
                         loss_sum / n_sum as f64, sci(lr), (cfg.batch * cfg.ctx * n_sum) as f64 / dt,
                         1000.0 * dt / n_sum as f64);
                (t_log, loss_sum, n_sum) = (Instant::now(), 0.0, 0);
            }
        }
        let val1 = evaluate(&model, &mut t, &val)?;
        println!("gpt: validation loss {val1:.4} (from {val0:.4})");
        let length = sample_length.unwrap_or(if cfg.ctx >= 256 { 400 } else { 120 });
        let text = sample(&model, &mut t, b"The Python interpreter ", length, temperature, seed)?;
        println!("gpt: sample: {}", String::from_utf8_lossy(&text));
        Ok((val0, val1))
    };
    match run() {
        Ok((val0, val1)) => match min_improvement {
            Some(x) if val0 - val1 < x => {
                println!("gpt: FAILED: the validation loss fell by {:.4} nats, less than {x}", val0 - val1);
                ExitCode::from(1)
            }
            _ => ExitCode::SUCCESS,
        },
        Err(e) => {
            eprintln!("gpt: {e}");
            ExitCode::from(1)
        }
    }
}
