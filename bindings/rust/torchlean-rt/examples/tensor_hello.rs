//! The Tensor API in a few lines: `[[1,2],[3,4]] @ ones((2,2))`, then broadcasting and operators.
//!
//! ```sh
//! TLRT_LIB_DIR=$PWD/build cargo run --offline --manifest-path bindings/rust/torchlean-rt/Cargo.toml --example tensor_hello
//! ```
use torchlean_rt::{Device, Result, Tensor};

/// Prints a 2-D tensor row by row.
fn show(name: &str, t: &Tensor) -> Result<()> {
    let v = t.to_vec()?;
    let cols = *t.shape().last().unwrap_or(&1) as usize;
    let rows: Vec<String> = v.chunks(cols.max(1)).map(|r| format!("{r:?}")).collect();
    println!("{name} = {:?} [{}]", t.shape(), rows.join(", "));
    Ok(())
}

fn main() -> Result<()> {
    let cpu = Device::CPU;
    let a = Tensor::from_f32(&[1.0, 2.0, 3.0, 4.0], &[2, 2], cpu)?;
    let ones = Tensor::ones(&[2, 2], cpu)?;
    let c = a.matmul(&ones)?;
    show("[[1,2],[3,4]] @ ones((2,2))", &c)?;

    // Broadcasting: a row of shape (2) added to every row; operators return Result.
    let row = Tensor::from_f32(&[10.0, 20.0], &[2], cpu)?;
    show("c + [10, 20]", &(&c + &row)?)?;
    show("(c * 0.5 - 1).t()", &(((&c * 0.5)? - 1.0)?.t()?))?;
    println!("sum = {:?}, mean = {:?}", c.sum()?.to_vec()?, c.mean()?.to_vec()?);

    // Errors are values: a shape mismatch names both shapes.
    if let Err(e) = &c + &Tensor::ones(&[3], cpu)? {
        println!("expected error: {e}");
    }
    Ok(())
}
